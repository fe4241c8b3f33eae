"""Reading GLM tool calls: `<tool_call>NAME<arg_key>k</arg_key><arg_value>v</arg_value>…</tool_call>`.

A second form carries the arguments as one JSON object after `>`:
`<tool_call>NAME>{"city": "Paris"}`, closed by `</tool_call>`, by the next
`<tool_call>` or by the end of the output. GLM-5.3-Flash writes it although its
template teaches the tagged form (SGLang's GLM-5.3-Flash detector accepts it
too), so every GLM variant reads it: a name never contains `>`, so nothing the
tagged form allows is read differently. The object must be the only thing
there: text after it makes the call malformed.

Each tag is one token in GLM's vocabulary. Whitespace between the pieces is
accepted (GLM-4.5 wrote newlines there); anything else out of place, a missing
name or a repeated key makes the call `malformed`, and the rest of the block up
to `</tool_call>` is consumed without becoming text. Values of parameters typed
as plain strings stream as they are generated; other values are read as JSON
by the schema once complete (see `argument_types`).
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Callable

from ..neutral.conversation import ToolSpec
from ..errors import TooDeep
from ..util.json_depth import MAX_JSON_DEPTH, loads_bounded
from .argument_types import is_plain_string, parameter_schema, typed_value
from .base import EndReason
from .call_events import CallEmitter, JsonObjectWriter
from .tagged_parser import unfinished_reason

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
KEY_OPEN, KEY_CLOSE = "<arg_key>", "</arg_key>"
VALUE_OPEN, VALUE_CLOSE = "<arg_value>", "</arg_value>"
ALL_TAGS = (CALL_OPEN, CALL_CLOSE, KEY_OPEN, KEY_CLOSE, VALUE_OPEN, VALUE_CLOSE)

NAME_LIMIT = 512
"""Characters of a name or key after which the block is judged malformed."""

_NAME = re.compile(r"[^\s<>\"'{}\[\](),;]+")


class _State(Enum):
    NAME = "name"
    MEMBER = "member"  # after the name or a value: <arg_key> or </tool_call>
    KEY = "key"
    BEFORE_VALUE = "before_value"
    VALUE = "value"
    JSON_ARGUMENTS = "json_arguments"  # after `NAME>`: one JSON object
    SKIP = "skip"  # malformed: consume up to </tool_call>


class GlmCallReader:
    """One `<tool_call>` block; see the module docstring."""

    def __init__(self, emitter: CallEmitter, find_tool: Callable[[str], ToolSpec | None]) -> None:
        self.done = False
        self.reopens = False
        self._emitter = emitter
        self._find_tool = find_tool
        self._writer = JsonObjectWriter(emitter)
        self._state = _State.NAME
        self._tool: ToolSpec | None = None
        self._buffer = ""
        self._key = ""
        self._schema: dict | None = None

    def tags(self) -> tuple[str, ...]:
        if self._state is _State.JSON_ARGUMENTS:
            return (CALL_CLOSE, CALL_OPEN)
        return (CALL_CLOSE,) if self._state is _State.SKIP else ALL_TAGS

    def on_text(self, text: str) -> None:
        state = self._state
        if state is _State.NAME and ">" in text:
            name, rest = (self._take_buffer() + text).split(">", 1)
            self._open_json_form(name.strip(), rest)
        elif state is _State.VALUE and is_plain_string(self._schema):
            self._writer.string_piece(text)
        elif state in (_State.NAME, _State.KEY, _State.VALUE, _State.JSON_ARGUMENTS):
            self._buffer += text
            if state in (_State.NAME, _State.KEY) and len(self._buffer) > NAME_LIMIT:
                self._malformed(f"tool call {state.value} is too long")
        elif state in (_State.MEMBER, _State.BEFORE_VALUE) and text.strip():
            self._malformed("unexpected text between the parts of a tool call")

    def on_tag(self, tag: str) -> None:
        handler = {
            _State.NAME: self._after_name,
            _State.MEMBER: self._after_member,
            _State.KEY: self._after_key,
            _State.BEFORE_VALUE: self._before_value,
            _State.VALUE: self._after_value,
            _State.JSON_ARGUMENTS: self._after_json,
            _State.SKIP: self._skip,
        }[self._state]
        handler(tag)

    def on_end(self, reason: EndReason) -> None:
        if self._state is _State.JSON_ARGUMENTS and self._json_object() is not None:
            self._finish_json()  # the JSON form needs no closing tag: a whole object is a whole call
        elif self._state is not _State.SKIP:
            self._emitter.fail(unfinished_reason(reason), "output ended inside a tool call")

    def _open_json_form(self, name: str, rest: str) -> None:
        if not _NAME.fullmatch(name):
            self._malformed("tool call without a valid name before '>'")
            return
        self._tool = self._find_tool(name)
        self._emitter.start(name)
        self._state = _State.JSON_ARGUMENTS
        self._buffer = rest

    def _after_json(self, tag: str) -> None:
        """`</tool_call>` ends the call; `<tool_call>` ends it and opens the next one."""
        if self._json_object() is None:
            self._emitter.fail("malformed", "tool call arguments after '>' are not one JSON object")
        else:
            self._finish_json()
        self._buffer = ""
        self.done = True
        self.reopens = tag == CALL_OPEN

    def _json_object(self) -> dict | None:
        try:
            value = loads_bounded(self._buffer.strip())
        except ValueError:  # not JSON, text after the object, or nested past the limit (TooDeep)
            return None
        return value if isinstance(value, dict) else None

    def _finish_json(self) -> None:
        self._writer.value(self._json_object())
        self._emitter.finish()

    def _after_name(self, tag: str) -> None:
        name = self._take_buffer().strip()
        if tag not in (KEY_OPEN, CALL_CLOSE) or not _NAME.fullmatch(name):
            self._malformed(f"tool call without a valid name before {tag}", tag)
            return
        self._tool = self._find_tool(name)
        self._emitter.start(name)
        self._after_member(tag)

    def _after_member(self, tag: str) -> None:
        if tag == KEY_OPEN:
            self._state = _State.KEY
        elif tag == CALL_CLOSE:
            self._writer.close()
            self._emitter.finish()
            self.done = True
        else:
            self._malformed(f"expected {KEY_OPEN} or {CALL_CLOSE}, got {tag}", tag)

    def _after_key(self, tag: str) -> None:
        key = self._take_buffer().strip()
        if tag != KEY_CLOSE or not key:
            self._malformed(f"argument key not closed by {KEY_CLOSE}", tag)
        elif self._writer.has_key(key):
            self._malformed(f"argument {key!r} given twice", tag)
        else:
            self._key = key
            self._schema = parameter_schema(self._tool, key)
            self._state = _State.BEFORE_VALUE

    def _before_value(self, tag: str) -> None:
        if tag != VALUE_OPEN:
            self._malformed(f"argument {self._key!r} has no {VALUE_OPEN}", tag)
            return
        if is_plain_string(self._schema):
            self._writer.key(self._key)
            self._writer.open_string()
        self._state = _State.VALUE

    def _after_value(self, tag: str) -> None:
        if tag != VALUE_CLOSE:
            self._malformed(f"argument {self._key!r} value not closed by {VALUE_CLOSE}", tag)
            return
        if is_plain_string(self._schema):
            self._writer.close_string()
        else:
            try:
                value = typed_value(self._take_buffer(), self._schema)
            except TooDeep:
                self._malformed(f"argument {self._key!r} is JSON nested deeper than {MAX_JSON_DEPTH} levels", tag)
                return
            self._writer.key(self._key)
            self._writer.value(value)
        self._state = _State.MEMBER

    def _skip(self, tag: str) -> None:
        self.done = tag == CALL_CLOSE

    def _malformed(self, detail: str, tag: str | None = None) -> None:
        self._emitter.fail("malformed", detail)
        self._buffer = ""
        self._state = _State.SKIP
        if tag == CALL_CLOSE:
            self.done = True

    def _take_buffer(self) -> str:
        text, self._buffer = self._buffer, ""
        return text
