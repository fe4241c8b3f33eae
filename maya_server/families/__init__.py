"""Model families: how a conversation becomes a prompt and model text becomes events.

`get_family(name)` is the one way to get a family by its configured name:

- `glm` — GLM-5.1's template (see `glm.py`); `glm-4.7` / `glm-5` (GLM-4.7 and
  GLM-5 template), `glm-5.1`, `glm-5.2`, `glm-5.3` pick a template variant explicitly.
- `deepseek-v4.1` — DeepSeek-V4.1 (V4.1's own encoder, `deepseek_v41.py`).
- `deepseek-v4` — DeepSeek-V4 as DeepSeek's toolkit writes it today (`deepseek_v4.py`).
- `chatml` — ChatML with Hermes tools and Qwen3 thinking (SmolLM2, Qwen).
"""

from __future__ import annotations

from typing import Callable

from .base import Family, StreamParser
from .chatml import ChatmlFamily
from .deepseek_v4 import DeepSeekV4Family
from .deepseek_v41 import DeepSeekV41Family
from .glm import GlmFamily

_FACTORIES: dict[str, Callable[[], Family]] = {
    "glm": GlmFamily,
    "glm-4.7": lambda: GlmFamily("4.7"),
    "glm-5": lambda: GlmFamily("4.7"),
    "glm-5.1": lambda: GlmFamily("5.1"),
    "glm-5.2": lambda: GlmFamily("5.2"),
    "glm-5.3": lambda: GlmFamily("5.3"),
    "deepseek-v4": DeepSeekV4Family,
    "deepseek-v4.1": DeepSeekV41Family,
    "chatml": ChatmlFamily,
}

FAMILY_NAMES: tuple[str, ...] = tuple(_FACTORIES)


def get_family(name: str) -> Family:
    """A fresh family for `name`; unknown names raise ValueError listing the valid ones."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ValueError(f"unknown family {name!r}; valid: {', '.join(FAMILY_NAMES)}") from None
    return factory()


__all__ = ["ChatmlFamily", "DeepSeekV41Family", "DeepSeekV4Family", "Family", "FAMILY_NAMES", "get_family", "GlmFamily", "StreamParser"]
