"""Build the configured engine: `--engine llamacpp` (llama-server as our child) `| scripted | upstream`."""

from __future__ import annotations

from ..config import DEFAULT_CTX, ConfigError, ServerConfig
from .base import Engine


def create_engine(config: ServerConfig) -> Engine:
    if config.engine == "llamacpp":
        from .llamacpp import LlamaCppEngine

        return LlamaCppEngine.start(config)
    if config.engine == "scripted":
        from .scripted import ScriptedEngine

        if config.script is None:
            raise ConfigError("script", "--engine scripted needs --script FILE (a JSON list of completions)")
        try:
            return ScriptedEngine.from_file(config.script, context_size=config.ctx or DEFAULT_CTX, delay=config.script_delay)
        except ValueError as exc:
            raise ConfigError("script", str(exc)) from None
    if config.engine == "upstream":
        from .upstream import UpstreamEngine

        return UpstreamEngine.connect(config)
    raise ConfigError("engine", f"the {config.engine} engine is not available in this build")
