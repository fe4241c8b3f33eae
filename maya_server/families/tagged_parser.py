"""The streaming parser shared by all families: reasoning, then text and tool calls.

Every family we serve writes its output the same way at the top level: an
optional reasoning block closed by `</think>`, then answer text interleaved
with tool-call blocks. Only the call syntax differs, so a family supplies a
`CallReader` for the inside of a call block and this class does the rest:
scanning for tags across chunk boundaries, trimming each section, and turning
an unfinished call at the end into `truncated` or `unterminated`.

Reasoning ends only at `</think>`: a tool-call tag inside reasoning is the
model thinking about a call, not making one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable, Protocol

from ..neutral.events import ParserEvent, ReasoningDelta, ReasoningFinished, TextDelta
from .base import EndReason
from .call_events import CallEmitter, InvalidReason
from .tag_scanner import TagScanner
from .trimmed_section import TrimmedSection


class CallReader(Protocol):
    """Reads one call block (between the opening tag and its end) into emitter calls."""

    done: bool
    """True once the block's closing tag was consumed."""

    reopens: bool
    """With `done`: the tag that ended the block opened the next call block (GLM's JSON form)."""

    def tags(self) -> tuple[str, ...]:
        """The tags that matter in the reader's current state."""

    def on_text(self, text: str) -> None:
        """Text between tags (may arrive in several pieces)."""

    def on_tag(self, tag: str) -> None:
        """One of `tags()` was found."""

    def on_end(self, reason: EndReason) -> None:
        """The output ended inside the block."""


def unfinished_reason(reason: EndReason) -> InvalidReason:
    """How a call cut off by the end of output is reported."""
    return "truncated" if reason == "length" else "unterminated"


@dataclass(frozen=True)
class OutputSyntax:
    call_open: str
    """The tag that opens a call block in answer text."""
    other_call_opens: tuple[str, ...] = ()
    """More spellings of it (DeepSeek's V4 and V4.1 DSML), read by the same call reader."""

    think_close: str = "</think>"
    think_open: str | None = None
    """A reasoning opener the model itself may write first (Qwen3); None when the prompt opens it."""


class _Mode(Enum):
    REASONING = "reasoning"
    TEXT = "text"
    CALL = "call"


class TaggedParser:
    """A `StreamParser` for one generation."""

    def __init__(
        self,
        syntax: OutputSyntax,
        reader_factory: Callable[[CallEmitter], CallReader],
        new_call_id: Callable[[], str],
        *,
        in_reasoning: bool,
    ) -> None:
        self._syntax = syntax
        self._make_reader = reader_factory
        self._events: list[ParserEvent] = []
        self._emitter = CallEmitter(new_call_id, self._events)
        self._scanner = TagScanner()
        self._reasoning = TrimmedSection()
        self._text = TrimmedSection()
        self._mode = _Mode.REASONING if in_reasoning else _Mode.TEXT
        self._reader: CallReader | None = None
        self._fresh = not in_reasoning
        self._raw: list[tuple[int, str, bool]] | None = None
        """The pieces read since `take_raw` (`StreamParser.take_raw`); None until `record_raw`."""

    def feed(self, text: str) -> list[ParserEvent]:
        self._scanner.push(text)
        self._drain()
        return self._take_events()

    def record_raw(self) -> None:
        self._raw = []

    def take_raw(self) -> list[tuple[int, str, bool]]:
        if self._raw is None:
            return []
        pieces, self._raw = self._raw, []
        return pieces

    def finish(self, reason: EndReason) -> list[ParserEvent]:
        rest = self._scanner.drain()
        self._note_raw(rest, False)
        if self._mode is _Mode.CALL:
            self._reader.on_end(reason)  # `rest` is a cut-off tag; the call fails either way
        else:
            self._route_text(rest)
        self._reasoning.end()
        self._text.end()
        return self._take_events()

    def _drain(self) -> None:
        while True:
            text, tag = self._scanner.next(self._tags())
            self._note_raw(text, False)
            self._route_text(text)
            if tag is None:
                return
            self._note_raw(tag, True)
            self._route_tag(tag)

    def _note_raw(self, text: str, tag: bool) -> None:
        if self._raw is not None and text:
            self._raw.append((len(self._events), text, tag))

    def _tags(self) -> tuple[str, ...]:
        if self._mode is _Mode.REASONING:
            return (self._syntax.think_close,)
        if self._mode is _Mode.CALL:
            return self._reader.tags()
        opens = (self._syntax.call_open, *self._syntax.other_call_opens)
        if self._fresh and self._syntax.think_open:
            return (*opens, self._syntax.think_open)
        return opens

    def _route_text(self, text: str) -> None:
        if not text:
            return
        if self._mode is _Mode.REASONING:
            self._emit(ReasoningDelta, self._reasoning.push(text))
        elif self._mode is _Mode.TEXT:
            self._emit(TextDelta, self._text.push(text))
            self._fresh = self._fresh and not self._text.started
        else:
            self._reader.on_text(text)

    def _route_tag(self, tag: str) -> None:
        if self._mode is _Mode.REASONING:
            self._reasoning.end()
            self._events.append(ReasoningFinished())
            self._mode = _Mode.TEXT
        elif self._mode is _Mode.CALL:
            self._reader.on_tag(tag)
            if self._reader.done and self._reader.reopens:
                self._reader = self._make_reader(self._emitter)
            elif self._reader.done:
                self._reader = None
                self._mode = _Mode.TEXT
        elif tag == self._syntax.think_open:
            self._open_reasoning_if_fresh(tag)
        else:
            self._text.end()
            self._fresh = False
            self._reader = self._make_reader(self._emitter)
            self._mode = _Mode.CALL

    def _open_reasoning_if_fresh(self, tag: str) -> None:
        """`<think>` opens reasoning only before any answer text; later it is just text."""
        if self._fresh:
            self._fresh = False
            self._mode = _Mode.REASONING
        else:
            self._route_text(tag)

    def _emit(self, kind: type, text: str) -> None:
        if text:
            self._events.append(kind(text))

    def _take_events(self) -> list[ParserEvent]:
        events = list(self._events)
        self._events.clear()
        return events
