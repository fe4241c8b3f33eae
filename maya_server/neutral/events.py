"""Neutral generation events: what the pipeline makes of a generation, for any API.

    ParserEvent     what a family's parser makes of the model's text (text, reasoning, tool calls)
    PromptProgress  how far the engine is through the prompt (only when progress was asked for)
    RawOutput       the model's own text as the parser read it (only when asked: a background task's log keeps it)
    Finished        the turn ended as a success: why, and the tokens it took
    Failed          the turn cannot be published as a success: the error, and the tokens it took
    PipelineEvent   any of them: what `GenerationService.run` yields, ending in one Finished or Failed
    McpToolCall, McpToolResult, McpRoundLimitReached
                    what the server-side MCP tool loop (`chat/mcp_loop.py`) adds between its rounds
    LoopEvent       a PipelineEvent or one of those: what the MCP loop yields to the Chat assembler

Assemblers (Chat Completions, Responses) consume only these; they never look at
raw model text again. This module imports nothing of the pipeline or the engines
(only the error classes), so engines, parsers, the pipeline and the assemblers
can all depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

from ..errors import MayaError


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


@dataclass(frozen=True)
class PromptProgress:
    """How far an engine is through a prompt: llama.cpp's `prompt_progress` convention.

    `processed` counts the prompt tokens in the engine's sequence so far, cached
    ones included, so it starts at `cache` and ends at `total`; the work actually
    timed is `(processed - cache) / (total - cache)`. llama-server reports these
    itself (`return_progress`); for engines that report nothing the generation
    pipeline synthesizes a start and an end from what it knows.
    """

    total: int
    cache: int
    processed: int
    time_ms: int

    def body(self) -> dict:
        return {"total": self.total, "cache": self.cache, "processed": self.processed, "time_ms": self.time_ms}


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    reasoning_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Finished:
    reason: Literal["stop", "length", "tool_calls"]
    usage: Usage


@dataclass(frozen=True)
class Failed:
    """The generation cannot be published as a success; `error` says why, `usage` what was consumed."""

    error: MayaError
    usage: Usage


@dataclass(frozen=True)
class RawOutput:
    """A piece of the model's text as the parser read it, before the events it made: `tag` when the parser read
    it as one of its tags (`</think>`, `<tool_call>`, a DSML tag), else plain text. A background task's log keeps
    these with its events, so that a replica taking the task over writes the cut turn back exactly as the model
    wrote it (`families/continuation.py`), whatever the family's syntax; nothing is published from them."""

    text: str
    tag: bool


PipelineEvent = Union[ParserEvent, PromptProgress, RawOutput, Finished, Failed]


@dataclass(frozen=True)
class McpToolCall:
    """An MCP call announced before it runs (so a stream shows it as it happens); `round` counts
    generations from 1."""

    round: int
    call_id: str
    server: str
    name: str
    arguments: str


@dataclass(frozen=True)
class McpToolResult:
    """The result of an announced MCP call, once it is done."""

    round: int
    call_id: str
    content: str
    is_error: bool


@dataclass(frozen=True)
class McpRoundLimitReached:
    """The model asked for another round of MCP calls past `mcp_max_rounds`; they were not run."""

    max_rounds: int


LoopEvent = Union[PipelineEvent, McpToolCall, McpToolResult, McpRoundLimitReached]
