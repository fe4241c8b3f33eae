"""The configured engine: `--engine llamacpp` (llama-server as our child) `| scripted | upstream` (one URL: an
`UpstreamEngine`; several: a `ReplicaSetEngine` over one per URL), and the family it serves.

The one place that reads the settings for an engine: each engine takes plain
values (`EmbeddedOptions`, `UpstreamOptions`, the scripted engine's file and
delay), so the engine layer never sees the CLI's config. An engine that cannot
start with a value says which option and what is wrong (`EngineOptionError`);
here that becomes a `ConfigError` naming the setting the option came from
(`EMBEDDED_SETTINGS`, `UPSTREAM_SETTINGS`), which the CLI prints before it
exits 2. A child that crashed while loading is an `EngineStartError` with
its exit status, to which `crash_advice` adds what to try. The engine reports
the chat template it read, the model folder's `config.json` `model_type` and
its vocabulary; the family they name is decided here too (`detect_model_family`,
`resolve_family`), against `--family`, and then checked against that template
(`check_chat_template`, `--template-check`); so is how start-up and `/v1/status`
word why that family (`ServerConfig.family_reason`) and where the context came
from (`context_source`).
"""

from __future__ import annotations

import logging
import signal
from dataclasses import replace
from typing import TYPE_CHECKING, Mapping

from .config import ServerConfig
from .engine.base import DEFAULT_CTX, Engine
from .errors import ConfigError, EngineOptionError, EngineStartError
from .families.detection import (
    FROM_TEMPLATE, V41_FAMILY, Detection, base_family, contradicts, detect_family, family_from_template,
)
from .pipeline.cache_scope import isolates

log = logging.getLogger("maya")

if TYPE_CHECKING:  # each engine's module is imported only when that engine is configured
    from .families.conformance import TemplateCheck
    from .engine.llama_server.engine import EmbeddedOptions
    from .engine.replicas.engine import ReplicaSetOptions
    from .engine.upstream.engine import UpstreamOptions

EMBEDDED_SETTINGS: Mapping[str, str] = {
    "model": "model", "slots": "slots", "ctx": "ctx", "threads": "threads", "gpu_layers": "gpu_layers",
    "cache_ram_mib": "cache_ram_mib", "mmproj": "mmproj", "tokenizer_dir": "tokenizer",
    "read_timeout": "upstream_read_timeout", "tokenize_cache_mib": "tokenize_cache_mib",
    "tokenize_timeout": "tokenize_timeout", "extra_args": "engine_args", "llama_server": "llama_server",
}
"""`EmbeddedOptions` field -> the setting that fills it (and that a refusal of the field names)."""
UPSTREAM_SETTINGS: Mapping[str, str] = {
    "url": "upstream_url", "tokenizer_dir": "tokenizer", "key": "upstream_key", "model": "upstream_model",
    "slots": "upstream_slots", "context_size": "ctx", "connect_timeout": "upstream_connect_timeout",
    "read_timeout": "upstream_read_timeout", "replicas": "upstream_url",
}
"""`UpstreamOptions` field (and `ReplicaSetOptions.replicas`) -> the setting that fills it. `url` is one of the
`upstream_url` list, filled per replica."""
WORDING = {
    "tokenizer_disagrees": "the tokenizer of --tokenizer DIR splits text differently from llama-server's; "
                           "drop --tokenizer to use llama-server's own",
}
"""`EngineOptionError.reason` -> the message that says which setting to change, where the engine's fact alone
would leave the operator guessing."""
MMPROJ_HINT = "start Maya with --mmproj FILE (config key mmproj, MAYA_MMPROJ), the model's mmproj GGUF"
"""Added to the embedded engine's refusal of images: the setting that turns them on."""


def create_engine(config: ServerConfig) -> Engine:
    if config.engine == "scripted":
        from .engine.scripted import ScriptedEngine

        if config.script is None:
            raise ConfigError("script", "--engine scripted needs --script FILE (a JSON list of completions)")
        try:
            engine = ScriptedEngine.from_file(config.script, context_size=config.ctx or DEFAULT_CTX,
                                              delay=config.script_delay)
        except ValueError as exc:
            raise ConfigError("script", str(exc)) from None
        engine.images_refusal = f"{engine.images_refusal}; run the llamacpp engine and {MMPROJ_HINT}"
        return engine
    try:
        engine = _start(config)
    except EngineOptionError as exc:
        settings = EMBEDDED_SETTINGS if config.engine == "llamacpp" else UPSTREAM_SETTINGS
        raise ConfigError(settings.get(exc.option, "engine"), WORDING.get(exc.reason, exc.problem)) from None
    except EngineStartError as exc:
        raise EngineStartError(f"{exc}{crash_advice(exc.returncode)}", returncode=exc.returncode) from None
    engine.batch_interval = config.relay_batch_ms / 1000  # both relay an engine's HTTP stream (upstream/engine.py)
    engine.prefill_concurrency = config.prefill_concurrency
    return engine


def _start(config: ServerConfig) -> Engine:
    if config.engine == "llamacpp":
        from .engine.llama_server.engine import LlamaCppEngine

        engine = LlamaCppEngine.start(embedded_options(config))
        if not engine.accepts_images:
            engine.images_refusal = f"{engine.images_refusal}; {MMPROJ_HINT}"
        return engine
    if config.engine == "upstream" and len(config.upstream_url) > 1:
        from .engine.replicas.engine import ReplicaSetEngine

        return ReplicaSetEngine.connect(replica_set_options(config))
    if config.engine == "upstream":
        from .engine.upstream.engine import UpstreamEngine

        return UpstreamEngine.connect(upstream_options(config))
    raise ConfigError("engine", f"the {config.engine} engine is not available in this build")


def with_served_model(config: ServerConfig, engine: Engine) -> ServerConfig:
    """The config whose `served_model_name` (what `/v1/models` lists and every answer's `model` says) is, in
    front of an upstream engine, the name the upstream serves (its `GET /v1/models`, or `--upstream-model`):
    the tokenizer folder's name says nothing about the model a client reaches. `--model-name` still wins."""
    if config.model_name or config.engine != "upstream":
        return config
    replicas = getattr(engine, "replicas", None)  # a replica set serves one model: the first replica's name
    info = getattr(replicas[0].engine if replicas else engine, "info", None)
    model = getattr(info, "model", None)
    return replace(config, model_name=model) if isinstance(model, str) and model else config


def embedded_options(config: ServerConfig) -> EmbeddedOptions:
    """The embedded engine's options. With the caches isolated per key, llama-server's RAM prompt cache is off:
    it is shared by every slot and keyed by tokens alone, so a slot kept for one key could load another key's
    state from it (`engine/upstream/slot_choice.py`)."""
    from .engine.llama_server.engine import EmbeddedOptions

    options = EmbeddedOptions(**{option: getattr(config, setting) for option, setting in EMBEDDED_SETTINGS.items()})
    if isolates(config.prompt_cache_isolation, config.api_keys) and options.cache_ram_mib:
        log.info("prompt caches are isolated per API key: llama-server's shared RAM prompt cache is off "
                 "(--prompt-cache-isolation shared keeps it)")
        options = replace(options, cache_ram_mib=0)
    return options


def upstream_options(config: ServerConfig, url: str | None = None) -> UpstreamOptions:
    """For `url` (one of several replicas), else the one `upstream_url`."""
    from .engine.upstream.engine import UpstreamOptions

    values = {option: getattr(config, setting) for option, setting in UPSTREAM_SETTINGS.items()
              if option not in ("url", "replicas")}
    return UpstreamOptions(url=url or config.upstream_url[0], **values)


def replica_set_options(config: ServerConfig) -> ReplicaSetOptions:
    from .engine.replicas.engine import ReplicaSetOptions

    return ReplicaSetOptions(
        replicas=tuple(upstream_options(config, url) for url in config.upstream_url),
        routing=config.replica_routing, affinity_entries=config.replica_affinity_entries,
        probe_s=config.replica_probe_s, check_s=config.replica_check_s, check_timeout=config.replica_check_timeout,
    )


def crash_advice(returncode: int | None) -> str:
    """What to try, naming the settings, after the child died by `returncode` while loading ("" for an ordinary
    exit, whose log says why: a missing or unreadable model, too little memory)."""
    if returncode is None or returncode >= 0:
        return ""
    if -returncode == signal.SIGILL:
        return ("\nSIGILL: the binary uses an instruction this CPU lacks. It is built for the CPU that built it and "
                "cached per CPU; delete ~/.cache/maya/llama-server-* (or MAYA_LLAMA_SERVER_CACHE) to rebuild it here.")
    return ("\nThis is a crash inside llama.cpp, not a problem with Maya's settings. Try its generic CPU kernels with "
            "--engine-arg=--no-repack (config key engine_args, MAYA_ENGINE_ARGS), or another llama-server flag the "
            "same way; on a GPU try --gpu-layers 0 to rule the GPU out.")


def template_family(engine: Engine) -> str | None:
    """The family the engine's chat template names (None: it has none, or one Maya does not recognise)."""
    return family_from_template(engine.chat_template)


def detect_model_family(engine: Engine) -> Detection:
    """The family the engine's model names and why: its chat template, else (DeepSeek-V4.1 ships none) its
    `config.json` `model_type` or its vocabulary (`families/detection.py`)."""
    return detect_family(engine.chat_template, engine.model_type, lambda token_id: _token_text(engine, token_id))


def _token_text(engine: Engine, token_id: int) -> str | None:
    """The text of one id of the engine's vocabulary; None where it has no such id (or no vocabulary of the model's
    own: the scripted engine's grows as it reads)."""
    if engine.name == "scripted":
        return None
    try:
        return engine.tokenizer.decode([token_id]) or None
    except Exception:  # a tokenizer may refuse an id beyond its vocabulary in its own way
        return None


NO_FAMILY = "the template names none: the default"
"""The reason given when the command's default family is served."""


def resolve_family(config: ServerConfig, detected: Detection | str | None) -> ServerConfig:
    """The config with the family to serve and why (`family_reason`): the model's (`detected`, or a family name
    its template gave), unless a flag names one; a flag that contradicts the model is a `ConfigError` naming
    both, unless `force_family` is set, and serving it anyway says so.

    `--family deepseek-v4` on a model whose config.json or vocabulary is V4.1's is such a contradiction, as one
    with its template is: V4's prompt is not what V4.1 was trained on (its tool calls go unparsed), and the
    evidence is as specific as a template's tokens; `--force-family` remains for the operator who means it."""
    if not isinstance(detected, Detection):
        detected = Detection(detected, FROM_TEMPLATE if detected else None)
    if not config.family_explicit:
        if detected.family is None:
            _warn_default_family(config)
            return replace(config, family_reason=NO_FAMILY)
        return replace(config, family=detected.family, family_reason=detected.reason or FROM_TEMPLATE)
    if not contradicts(config.family, detected.family):
        return replace(config, family_reason="as configured")
    model = _model_said(detected)
    if not config.force_family:
        raise ConfigError(
            "family",
            f"--family {config.family} contradicts {model}; drop --family to use {detected.family}, "
            f"or add --force-family to serve {config.family} anyway",
        )
    log.warning("serving --family %s with --force-family, though %s", config.family, model)
    return replace(config, family_reason=f"as configured, with --force-family over the model's {detected.family}")


def _model_said(detected: Detection) -> str:
    if detected.reason in (None, FROM_TEMPLATE):
        return f"the model's chat template, which is {detected.family}"
    return f"the model, which is {detected.family} ({detected.reason})"


DEFAULT_FAMILY_OTHERS = {
    "glm": "a DeepSeek-V4 model needs maya-ds4 (V4.1 is told by its vocabulary or config.json)",
    "deepseek-v4": "a GLM model needs maya",
}
"""For a command's default family: the other command, the one a model of the other family needs."""


def _warn_default_family(config: ServerConfig) -> None:
    """A model whose chat template names no family (or that has none) is served in the command's default
    family whatever its vocabulary: say so, and how to serve another (the scripted engine has no template)."""
    if config.engine == "scripted":
        return
    other = DEFAULT_FAMILY_OTHERS.get(base_family(config.family))
    log.warning(
        "the model's chat template names no family Maya knows (or the model has none): serving it as %s, this "
        "command's default. A model of another family would get prompts in a format it was not trained on: %s"
        "--family NAME serves another (maya --help lists them)",
        config.family, f"{other}, and " if other else "",
    )


def context_source(config: ServerConfig, served: int) -> str:
    """Where the context per sequence that `served` tokens came from, as start-up says it: `--ctx` only when the
    engine serves what `--ctx` asked (the embedded llama-server caps a context above the model's training
    context, which then is where it came from)."""
    if config.ctx is not None and served == config.ctx:
        return "--ctx"
    if config.ctx is not None:
        capped_by = ("llama-server caps it at the model's training context" if config.engine == "llamacpp"
                     else "the engine serves no more")
        return f"--ctx asked {config.ctx}; {capped_by}"
    if config.engine == "llamacpp":
        return "the model's training context"
    if config.engine == "scripted":
        return "Maya's default"
    return "the engine's own"


V4_TEMPLATE_ON_V41 = ("the model carries DeepSeek-V4's chat template, a converter's copy: DeepSeek-V4.1 ships none, "
                      "and its own encoder, not V4's template, is the reference")
"""Why a V4.1 model carrying V4's template is not checked against it."""


def check_chat_template(config: ServerConfig, engine: Engine) -> TemplateCheck:
    """The start-up conformance check of the family against the engine's chat template (`--template-check`):
    a difference is a WARNING, or with `fatal` a `ConfigError` naming the setting (exit 2)."""
    from .families import get_family
    from .families.conformance import TemplateCheck, check_template

    if config.template_check == "off":
        return TemplateCheck("off", config.family, detail="--template-check off")
    if config.family == V41_FAMILY and family_from_template(engine.chat_template) == "deepseek-v4":
        return TemplateCheck("skipped", config.family, detail=V4_TEMPLATE_ON_V41)
    report = check_template(config.family, get_family(config.family), engine.chat_template, engine.tokenizer)
    if report.failed and config.template_check == "fatal":
        raise ConfigError("template_check", f"{report.message()} (--template-check warn serves it anyway)")
    if report.failed:
        log.warning("%s", report.message())
    else:
        log.info("%s (%.0f ms)", report.message(), report.elapsed_ms)
    return report
