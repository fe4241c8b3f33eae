"""Model families: how a conversation becomes a prompt and model text becomes events.

`get_dialect(name)` is the one way to get a dialect by its configured name:

- `glm` — GLM-5.1's template (see `glm.py`); `glm-4.7` / `glm-5` (GLM-4.7 and
  GLM-5 template), `glm-5.1`, `glm-5.2` pick a template variant explicitly.
- `deepseek-v4` — DeepSeek-V4 / V4.1 (DeepSeek's encoding_dsv4.py).
- `chatml` — ChatML with Hermes tools and Qwen3 thinking (SmolLM2, Qwen).
"""

from __future__ import annotations

from typing import Callable

from .base import Dialect, StreamParser
from .chatml import ChatmlDialect
from .deepseek_v4 import DeepSeekV4Dialect
from .glm import GlmDialect

_FACTORIES: dict[str, Callable[[], Dialect]] = {
    "glm": GlmDialect,
    "glm-4.7": lambda: GlmDialect("4.7"),
    "glm-5": lambda: GlmDialect("4.7"),
    "glm-5.1": lambda: GlmDialect("5.1"),
    "glm-5.2": lambda: GlmDialect("5.2"),
    "deepseek-v4": DeepSeekV4Dialect,
    "chatml": ChatmlDialect,
}

DIALECT_NAMES: tuple[str, ...] = tuple(_FACTORIES)


def get_dialect(name: str) -> Dialect:
    """A fresh dialect for `name`; unknown names raise ValueError listing the valid ones."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ValueError(f"unknown dialect {name!r}; valid: {', '.join(DIALECT_NAMES)}") from None
    return factory()


__all__ = ["DIALECT_NAMES", "ChatmlDialect", "DeepSeekV4Dialect", "Dialect", "GlmDialect", "StreamParser", "get_dialect"]
