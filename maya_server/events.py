"""Neutral generation events: what a dialect's parser makes of the model's text.

Assemblers (Chat Completions, Responses) consume only these; they never look at
raw model text again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class ReasoningFinished:
    """The model closed its reasoning (e.g. `</think>`): the reasoning is complete, even if the
    output limit ends the turn before anything follows it."""


@dataclass(frozen=True)
class ToolCallStarted:
    index: int
    call_id: str
    name: str


@dataclass(frozen=True)
class ToolCallArgumentsDelta:
    index: int
    text: str


@dataclass(frozen=True)
class ToolCallFinished:
    """The call is complete; `arguments` is the whole JSON object text (the joined deltas)."""

    index: int
    arguments: str


@dataclass(frozen=True)
class ToolCallInvalid:
    """The model's tool-call syntax could not be parsed.

    `reason` is `malformed` (bad syntax), `truncated` (the output limit ended the
    call) or `unterminated` (the turn ended inside the call). `index` is the call's
    index when it had started, else None. Never a success, never silent text.
    """

    index: int | None
    reason: Literal["malformed", "truncated", "unterminated"]
    detail: str


ParserEvent = Union[TextDelta, ReasoningDelta, ReasoningFinished, ToolCallStarted, ToolCallArgumentsDelta, ToolCallFinished, ToolCallInvalid]
