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
the chat template it read; the family it names is decided here too
(`template_family`, `resolve_family`), against `--family`.
"""

from __future__ import annotations

import signal
from dataclasses import replace
from typing import TYPE_CHECKING, Mapping

from .config import ServerConfig
from .engine.base import DEFAULT_CTX, Engine
from .errors import ConfigError, EngineOptionError, EngineStartError
from .families.detection import contradicts, family_from_template

if TYPE_CHECKING:  # each engine's module is imported only when that engine is configured
    from .engine.llamacpp import EmbeddedOptions
    from .engine.replicas import ReplicaSetOptions
    from .engine.upstream import UpstreamOptions

EMBEDDED_SETTINGS: Mapping[str, str] = {
    "model": "model", "slots": "slots", "ctx": "ctx", "threads": "threads", "gpu_layers": "gpu_layers",
    "cache_ram_mib": "cache_ram_mib", "mmproj": "mmproj", "tokenizer_dir": "tokenizer",
    "read_timeout": "upstream_read_timeout", "tokenize_cache_mib": "tokenize_cache_mib", "extra_args": "engine_args",
    "llama_server": "llama_server",
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
    engine.batch_interval = config.relay_batch_ms / 1000  # both relay an engine's HTTP stream (upstream.py)
    engine.prefill_concurrency = config.prefill_concurrency
    return engine


def _start(config: ServerConfig) -> Engine:
    if config.engine == "llamacpp":
        from .engine.llamacpp import LlamaCppEngine

        engine = LlamaCppEngine.start(embedded_options(config))
        if not engine.accepts_images:
            engine.images_refusal = f"{engine.images_refusal}; {MMPROJ_HINT}"
        return engine
    if config.engine == "upstream" and len(config.upstream_url) > 1:
        from .engine.replicas import ReplicaSetEngine

        return ReplicaSetEngine.connect(replica_set_options(config))
    if config.engine == "upstream":
        from .engine.upstream import UpstreamEngine

        return UpstreamEngine.connect(upstream_options(config))
    raise ConfigError("engine", f"the {config.engine} engine is not available in this build")


def embedded_options(config: ServerConfig) -> EmbeddedOptions:
    from .engine.llamacpp import EmbeddedOptions

    return EmbeddedOptions(**{option: getattr(config, setting) for option, setting in EMBEDDED_SETTINGS.items()})


def upstream_options(config: ServerConfig, url: str | None = None) -> UpstreamOptions:
    """For `url` (one of several replicas), else the one `upstream_url`."""
    from .engine.upstream import UpstreamOptions

    values = {option: getattr(config, setting) for option, setting in UPSTREAM_SETTINGS.items()
              if option not in ("url", "replicas")}
    return UpstreamOptions(url=url or config.upstream_url[0], **values)


def replica_set_options(config: ServerConfig) -> ReplicaSetOptions:
    from .engine.replicas import ReplicaSetOptions

    return ReplicaSetOptions(
        replicas=tuple(upstream_options(config, url) for url in config.upstream_url),
        routing=config.replica_routing, affinity_entries=config.replica_affinity_entries,
        probe_s=config.replica_probe_s,
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


def resolve_family(config: ServerConfig, detected: str | None) -> ServerConfig:
    """The config with the family to serve: the template's, unless a flag names one; a flag that
    contradicts the template is a `ConfigError` naming both, unless `force_family` is set."""
    if not config.family_explicit:
        return replace(config, family=detected) if detected is not None else config
    if contradicts(config.family, detected) and not config.force_family:
        raise ConfigError(
            "family",
            f"--family {config.family} contradicts the model's chat template, which is {detected}; "
            f"drop --family to use {detected}, or add --force-family to serve {config.family} anyway",
        )
    return config
