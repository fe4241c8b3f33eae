"""The configured engine: `--engine llamacpp` (llama-server as our child) `| scripted | upstream` (one URL: an
`UpstreamEngine`; several: a `ReplicaSetEngine` over one per URL).

The one place that reads the settings for an engine: each engine takes plain
values (`EmbeddedOptions`, `UpstreamOptions`, the scripted engine's file and
delay), so the engine layer never sees the CLI's config. A start that fails is
a `ConfigError` naming the setting; the CLI prints it and exits 2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .config import ServerConfig
from .engine.base import DEFAULT_CTX, Engine
from .errors import ConfigError

if TYPE_CHECKING:  # each engine's module is imported only when that engine is configured
    from .engine.llamacpp import EmbeddedOptions
    from .engine.replicas import ReplicaSetOptions
    from .engine.upstream import UpstreamOptions


def create_engine(config: ServerConfig) -> Engine:
    if config.engine == "scripted":
        from .engine.scripted import ScriptedEngine

        if config.script is None:
            raise ConfigError("script", "--engine scripted needs --script FILE (a JSON list of completions)")
        try:
            return ScriptedEngine.from_file(config.script, context_size=config.ctx or DEFAULT_CTX,
                                            delay=config.script_delay)
        except ValueError as exc:
            raise ConfigError("script", str(exc)) from None
    if config.engine == "llamacpp":
        from .engine.llamacpp import LlamaCppEngine

        engine = LlamaCppEngine.start(embedded_options(config))
    elif config.engine == "upstream" and len(config.upstream_url) > 1:
        from .engine.replicas import ReplicaSetEngine

        engine = ReplicaSetEngine.connect(replica_set_options(config))
    elif config.engine == "upstream":
        from .engine.upstream import UpstreamEngine

        engine = UpstreamEngine.connect(upstream_options(config))
    else:
        raise ConfigError("engine", f"the {config.engine} engine is not available in this build")
    engine.batch_interval = config.relay_batch_ms / 1000  # both relay an engine's HTTP stream (upstream.py)
    return engine


def embedded_options(config: ServerConfig) -> EmbeddedOptions:
    from .engine.llamacpp import EmbeddedOptions

    return EmbeddedOptions(
        model=config.model, slots=config.slots, ctx=config.ctx, threads=config.threads, gpu_layers=config.gpu_layers,
        cache_ram_mib=config.cache_ram_mib, mmproj=config.mmproj, tokenizer_dir=config.tokenizer,
        read_timeout=config.upstream_read_timeout, tokenize_cache_mib=config.tokenize_cache_mib,
        extra_args=config.engine_args,
    )


def upstream_options(config: ServerConfig, url: str | None = None) -> UpstreamOptions:
    """For `url` (one of several replicas), else the one `upstream_url`."""
    from .engine.upstream import UpstreamOptions

    return UpstreamOptions(
        url=url or config.upstream_url[0], tokenizer_dir=config.tokenizer, key=config.upstream_key,
        model=config.upstream_model, slots=config.upstream_slots, context_size=config.ctx,
        connect_timeout=config.upstream_connect_timeout, read_timeout=config.upstream_read_timeout,
    )


def replica_set_options(config: ServerConfig) -> ReplicaSetOptions:
    from .engine.replicas import ReplicaSetOptions

    return ReplicaSetOptions(
        replicas=tuple(upstream_options(config, url) for url in config.upstream_url),
        routing=config.replica_routing, affinity_entries=config.replica_affinity_entries,
        probe_s=config.replica_probe_s,
    )
