"""Reading DeepSeek's DSML tool calls (V4 and V4.1 spell the tags differently).

    <｜DSML｜tool_calls>                                     V4.1: <｜DSML｜ calls>
    <｜DSML｜invoke name="NAME">                             V4.1: <｜DSML｜ invoke name="NAME">
    <｜DSML｜parameter name="KEY" string="true">raw text</｜DSML｜parameter>
    <｜DSML｜parameter name="KEY2" string="false">JSON</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜tool_calls>

`｜DSML｜` is one token; V4.1 puts a space before each tag name (`DsmlTags`). Either family reads both spellings,
as DeepSeek's own stream parser does (deepseek-recipe reads V4's tags in V4.1 output and V4.1's in V4's), so a
block is whichever release's tags the model wrote. Whitespace between elements is
accepted; a missing piece (name, `string=` flag, a closing tag), stray text, a repeated parameter or a
`string="false"` value that is not JSON makes the call `malformed`, and the rest of the block is consumed without
becoming text. `string="true"` values stream as they are generated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from ..util.json_depth import loads_bounded, reject_constant
from .base import EndReason
from .call_events import CallEmitter, JsonObjectWriter
from .tagged_parser import unfinished_reason

DSML = "｜DSML｜"
NAME_END = '">'
STRING_TRUE, STRING_FALSE = '" string="true">', '" string="false">'


@dataclass(frozen=True)
class DsmlTags:
    """One release's DSML tag names: `block` wraps the calls, `invoke` is one call, `parameter` one argument."""

    block: str
    invoke: str
    parameter: str

    @property
    def block_open(self) -> str:
        return f"<{DSML}{self.block}>"

    @property
    def block_close(self) -> str:
        return f"</{DSML}{self.block}>"

    @property
    def invoke_open(self) -> str:
        return f'<{DSML}{self.invoke} name="'

    @property
    def invoke_close(self) -> str:
        return f"</{DSML}{self.invoke}>"

    @property
    def param_open(self) -> str:
        return f'<{DSML}{self.parameter} name="'

    @property
    def param_close(self) -> str:
        return f"</{DSML}{self.parameter}>"

    @property
    def structure(self) -> tuple[str, ...]:
        return (self.block_open, self.block_close, self.invoke_open, self.invoke_close, self.param_open,
                self.param_close)


V4_TAGS = DsmlTags("tool_calls", "invoke", "parameter")
V41_TAGS = DsmlTags(" calls", " invoke", " parameter")
BLOCK_OPENS = (V4_TAGS.block_open, V41_TAGS.block_open)
"""The tags that open a calls block in either release's spelling."""

class _Spellings:
    """Each DSML tag's spellings in several releases: `tag in spellings.block_close` and so on."""

    def __init__(self, releases: tuple[DsmlTags, ...]) -> None:
        self.block_close = frozenset(t.block_close for t in releases)
        self.invoke_open = frozenset(t.invoke_open for t in releases)
        self.invoke_close = frozenset(t.invoke_close for t in releases)
        self.param_open = frozenset(t.param_open for t in releases)
        self.param_close = frozenset(t.param_close for t in releases)
        self.structure = tuple(tag for t in releases for tag in t.structure)


NAME_LIMIT = 512
_NAME = re.compile(r"[^\s<>\"'{}\[\](),;]+")
_KEY = re.compile(r'[^"<>\n]+')


class _State(Enum):
    BLOCK = "block"
    INVOKE_NAME = "invoke name"
    INVOKE_BODY = "invoke"
    PARAM_NAME = "parameter name"
    PARAM_VALUE = "parameter value"
    SKIP = "skip"


class DsmlCallReader:
    """One DSML calls block (`<｜DSML｜tool_calls>` in V4), possibly holding several invokes."""

    def __init__(self, emitter: CallEmitter) -> None:
        self._tags = _Spellings((V4_TAGS, V41_TAGS))
        self.done = False
        self.reopens = False
        self._emitter = emitter
        self._state = _State.BLOCK
        self._writer: JsonObjectWriter | None = None
        self._buffer = ""
        self._key = ""
        self._is_string = False
        self._completed = 0

    def tags(self) -> tuple[str, ...]:
        if self._state is _State.SKIP:
            return tuple(self._tags.block_close)
        if self._state is _State.INVOKE_NAME:
            return self._tags.structure + (NAME_END,)
        if self._state is _State.PARAM_NAME:
            return self._tags.structure + (STRING_TRUE, STRING_FALSE)
        return self._tags.structure

    def on_text(self, text: str) -> None:
        state = self._state
        if state is _State.PARAM_VALUE and self._is_string:
            self._writer.string_piece(text)
        elif state in (_State.INVOKE_NAME, _State.PARAM_NAME, _State.PARAM_VALUE):
            self._buffer += text
            if state is not _State.PARAM_VALUE and len(self._buffer) > NAME_LIMIT:
                self._malformed(f"DSML {state.value} is too long")
        elif state in (_State.BLOCK, _State.INVOKE_BODY) and text.strip():
            self._malformed(f"unexpected text in a DSML {state.value}")

    def on_tag(self, tag: str) -> None:
        handler = {
            _State.BLOCK: self._in_block,
            _State.INVOKE_NAME: self._after_invoke_name,
            _State.INVOKE_BODY: self._in_invoke,
            _State.PARAM_NAME: self._after_param_name,
            _State.PARAM_VALUE: self._after_value,
            _State.SKIP: self._skip,
        }[self._state]
        handler(tag)

    def on_end(self, reason: EndReason) -> None:
        between_calls = self._state is _State.BLOCK and self._completed > 0
        if self._state is not _State.SKIP and not between_calls:
            self._emitter.fail(unfinished_reason(reason), "output ended inside a DSML tool call")

    def _in_block(self, tag: str) -> None:
        if tag in self._tags.invoke_open:
            self._state = _State.INVOKE_NAME
        elif tag in self._tags.block_close:
            self.done = True
        else:
            self._malformed(f"expected an invoke, got {tag}", tag)

    def _after_invoke_name(self, tag: str) -> None:
        name = self._take_buffer()
        if tag != NAME_END or not _NAME.fullmatch(name):
            self._malformed(f"invoke without a valid name before {tag}", tag)
            return
        self._emitter.start(name)
        self._writer = JsonObjectWriter(self._emitter)
        self._state = _State.INVOKE_BODY

    def _in_invoke(self, tag: str) -> None:
        if tag in self._tags.param_open:
            self._state = _State.PARAM_NAME
        elif tag in self._tags.invoke_close:
            self._writer.close()
            self._emitter.finish()
            self._completed += 1
            self._state = _State.BLOCK
        else:
            self._malformed(f"expected a parameter or the invoke's closing tag, got {tag}", tag)

    def _after_param_name(self, tag: str) -> None:
        key = self._take_buffer()
        if tag not in (STRING_TRUE, STRING_FALSE) or not _KEY.fullmatch(key):
            self._malformed(f'parameter without a name and string="true|false" before {tag}', tag)
        elif self._writer.has_key(key):
            self._malformed(f"parameter {key!r} given twice", tag)
        else:
            self._key, self._is_string = key, tag == STRING_TRUE
            if self._is_string:
                self._writer.key(key)
                self._writer.open_string()
            self._state = _State.PARAM_VALUE

    def _after_value(self, tag: str) -> None:
        if tag not in self._tags.param_close:
            self._malformed(f"parameter {self._key!r} not closed by its closing tag", tag)
        elif self._is_string:
            self._writer.close_string()
            self._state = _State.INVOKE_BODY
        else:
            self._json_value(self._take_buffer())

    def _json_value(self, raw: str) -> None:
        try:
            value = loads_bounded(raw, parse_constant=reject_constant)
        except ValueError:
            self._malformed(f'parameter {self._key!r} is string="false" but not JSON')
            return
        self._writer.key(self._key)
        self._writer.value(value)
        self._state = _State.INVOKE_BODY

    def _skip(self, tag: str) -> None:
        self.done = tag in self._tags.block_close

    def _malformed(self, detail: str, tag: str | None = None) -> None:
        self._emitter.fail("malformed", detail)
        self._buffer = ""
        self._state = _State.SKIP
        if tag in self._tags.block_close:
            self.done = True

    def _take_buffer(self) -> str:
        text, self._buffer = self._buffer, ""
        return text

