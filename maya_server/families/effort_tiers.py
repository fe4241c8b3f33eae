"""Which reasoning efforts a family has: `max` is DeepSeek's own tier, refused elsewhere before generation.

Why a check of its own: both APIs accept `max` on the wire (DeepSeek's toolkit, deepseek-recipe 0.2.0, takes it
as an OpenAI effort, and the OpenAI SDK's `ReasoningEffort` type lists it), but only DeepSeek's models have a tier
above `xhigh`. A family without one would have to pretend (render `xhigh`, or nothing), and the client would never
know its request was not honoured; so the request is a 400 in the validation phase, before anything is stored or
the engine is called, naming the param and the values this family does take. The renderers are left to render
only efforts their family has.

DeepSeek families are recognised by name (`deepseek-v4`, `deepseek-v4.1`, any later `deepseek…`), so a new
DeepSeek family has the tier without being listed here.
"""

from __future__ import annotations

from typing import get_args

from ..errors import InvalidRequestError
from ..neutral.conversation import ReasoningEffort
from .base import Family

DEEPSEEK_ONLY = ("max",)
"""Efforts only DeepSeek families have."""

COMMON = tuple(effort for effort in get_args(ReasoningEffort) if effort not in DEEPSEEK_ONLY)
"""Efforts every family takes (OpenAI's own)."""


def has_deepseek_tiers(family: Family) -> bool:
    return family.name.startswith("deepseek")


def check_effort(family: Family, effort: ReasoningEffort | None, param: str) -> None:
    """A 400 at `param` (OpenAI's `unsupported_value`) when `family` has no tier for `effort`; None otherwise."""
    if effort not in DEEPSEEK_ONLY or has_deepseek_tiers(family):
        return
    accepted = ", ".join(f"'{value}'" for value in COMMON)
    raise InvalidRequestError(
        f"Unsupported value: '{param}' does not support {effort!r} with this model. Reasoning effort {effort!r} is "
        f"DeepSeek's own tier, and this model's family {family.name!r} has none; use one of {accepted} "
        f"('{COMMON[-1]}' is this family's highest).",
        param=param, code="unsupported_value",
    )
