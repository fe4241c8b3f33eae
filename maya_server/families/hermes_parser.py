"""Reading Hermes tool calls (ChatML / Qwen): `<tool_call>{"name": …, "arguments": {…}}</tool_call>`.

The usual key order (`name` first, then an `arguments` object) is recognised
as soon as it is complete, so the call starts and its arguments stream while
the model writes them. Any other shape is parsed once the block closes. Either
way the block must be exactly one JSON object with a string `name` and object
`arguments` (or a string holding one), else the call is `malformed`.
"""

from __future__ import annotations

import json
import re

from ..util.json_depth import MAX_JSON_DEPTH, loads_bounded
from .base import EndReason
from .call_events import CallEmitter, json_text
from .tagged_parser import unfinished_reason

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"

_STREAMABLE_PREFIX = re.compile(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*(?=\{)')


class HermesCallReader:
    def __init__(self, emitter: CallEmitter) -> None:
        self.done = False
        self.reopens = False
        self._emitter = emitter
        self._body = ""
        self._failed = False
        self._name: str | None = None
        self._span: _ObjectSpan | None = None
        self._span_from = 0

    def tags(self) -> tuple[str, ...]:
        return (CALL_CLOSE,) if self._failed else (CALL_CLOSE, CALL_OPEN)

    def on_text(self, text: str) -> None:
        if self._failed:
            return
        self._body += text
        if self._span is None:
            self._try_start()
        if self._span is not None:
            self._stream()

    def on_tag(self, tag: str) -> None:
        if tag == CALL_OPEN:
            self._fail("a tool call opened inside another")
            return
        if not self._failed:
            self._close()
        self.done = True

    def on_end(self, reason: EndReason) -> None:
        if not self._failed:
            self._emitter.fail(unfinished_reason(reason), "output ended inside a tool call")

    def _try_start(self) -> None:
        match = _STREAMABLE_PREFIX.match(self._body)
        if match is None:
            return
        name = _decode_string(match.group(1))
        if not name:
            return
        self._name = name
        self._emitter.start(name)
        self._span = _ObjectSpan()
        self._span_from = match.end()

    def _stream(self) -> None:
        piece = self._body[self._span_from:]
        used = self._span.consume(piece)
        self._span_from += used
        self._emitter.delta(piece[:used])

    def _close(self) -> None:
        parsed = _parse_call(self._body)
        if parsed is None:
            self._emitter.fail("malformed", "tool call is not a JSON object with a name and object arguments")
        elif self._span is not None:
            if not self._span.complete or parsed[0] != self._name:
                self._emitter.fail("malformed", "tool call JSON is incomplete")
            else:
                self._emitter.finish()
        else:
            self._emitter.start(parsed[0])
            self._emitter.delta(json_text(parsed[1]))
            self._emitter.finish()

    def _fail(self, detail: str) -> None:
        self._emitter.fail("malformed", detail)
        self._failed = True


def _parse_call(body: str) -> tuple[str, dict] | None:
    try:
        value = loads_bounded(body, MAX_JSON_DEPTH + 1)  # the arguments, one level down, may be MAX_JSON_DEPTH deep
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
        return None
    arguments = value.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = loads_bounded(arguments)
        except ValueError:
            return None
    return (value["name"], arguments) if isinstance(arguments, dict) else None


def _decode_string(inner: str) -> str | None:
    try:
        return json.loads(f'"{inner}"')
    except ValueError:
        return None


class _ObjectSpan:
    """Follows one JSON object's text to its closing brace (strings and escapes aware)."""

    def __init__(self) -> None:
        self.complete = False
        self._depth = 0
        self._in_string = False
        self._escaped = False

    def consume(self, text: str) -> int:
        """How many leading characters of `text` belong to the object."""
        for position, char in enumerate(text):
            if self.complete:
                return position
            self._step(char)
        return len(text)

    def _step(self, char: str) -> None:
        if self._in_string:
            if self._escaped:
                self._escaped = False
            elif char == "\\":
                self._escaped = True
            elif char == '"':
                self._in_string = False
        elif char == '"':
            self._in_string = True
        elif char in "{[":
            self._depth += 1
        elif char in "}]":
            self._depth -= 1
            self.complete = self._depth == 0
