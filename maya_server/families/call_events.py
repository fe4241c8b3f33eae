"""Turning a parsed tool call into neutral events, the same way for every family.

A family's call reader says what it found (a name, argument text, the end);
`CallEmitter` numbers the calls, keeps the joined argument deltas and checks,
at the end, that they form one JSON object, so `ToolCallFinished.arguments`
always equals the deltas and a call can never succeed with broken arguments.
`JsonObjectWriter` builds that object piece by piece for families whose
arguments arrive as key/value pairs (GLM, DSML), streaming string values as
they are generated.
"""

from __future__ import annotations

import json
from typing import Callable, Literal

from ..neutral.events import (
    ParserEvent,
    ToolCallArgumentsDelta,
    ToolCallFinished,
    ToolCallInvalid,
    ToolCallStarted,
)
from ..util.json_depth import loads_bounded, reject_constant

InvalidReason = Literal["malformed", "truncated", "unterminated"]


class CallEmitter:
    """Appends tool-call events to a shared event list."""

    def __init__(self, new_call_id: Callable[[], str], events: list[ParserEvent]) -> None:
        self._new_call_id = new_call_id
        self._events = events
        self._next_index = 0
        self._open: int | None = None
        self._arguments: list[str] = []

    def start(self, name: str) -> None:
        self._open = self._next_index
        self._next_index += 1
        self._arguments = []
        self._events.append(ToolCallStarted(self._open, self._new_call_id(), name))

    def delta(self, text: str) -> None:
        if text and self._open is not None:
            self._arguments.append(text)
            self._events.append(ToolCallArgumentsDelta(self._open, text))

    def finish(self) -> None:
        """Close the open call; arguments that are not one JSON object make it malformed."""
        arguments = "".join(self._arguments)
        if not _is_json_object(arguments):
            self.fail("malformed", "tool call arguments are not a JSON object")
            return
        self._events.append(ToolCallFinished(self._open, arguments))
        self._open = None

    def fail(self, reason: InvalidReason, detail: str) -> None:
        """Report the current call (or a call that never got a name) as invalid."""
        self._events.append(ToolCallInvalid(self._open, reason, detail))
        self._open = None


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(loads_bounded(text, parse_constant=reject_constant), dict)
    except ValueError:
        return False


def json_text(value: object) -> str:
    """JSON the way the official templates write it (`json.dumps`, unicode kept)."""
    return json.dumps(value, ensure_ascii=False)


def escape_string_piece(text: str) -> str:
    """A piece of a JSON string's inside; escaping is per character, so pieces concatenate."""
    return json_text(text)[1:-1]


class JsonObjectWriter:
    """Streams `{"k": v, ...}` through an emitter, one member at a time."""

    def __init__(self, emitter: CallEmitter) -> None:
        self._emit = emitter.delta
        self._keys: set[str] = set()

    def has_key(self, key: str) -> bool:
        return key in self._keys

    def key(self, key: str) -> None:
        opener = ", " if self._keys else "{"
        self._keys.add(key)
        self._emit(opener + json_text(key) + ": ")

    def open_string(self) -> None:
        self._emit('"')

    def string_piece(self, text: str) -> None:
        self._emit(escape_string_piece(text))

    def close_string(self) -> None:
        self._emit('"')

    def value(self, value: object) -> None:
        self._emit(json_text(value))

    def close(self) -> None:
        self._emit("}" if self._keys else "{}")
