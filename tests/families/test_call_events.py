"""Tool calls as neutral events, the same for every family: calls are numbered from 0 in order, each gets a
fresh call id, empty deltas are dropped, `ToolCallFinished.arguments` always equals the joined deltas, and
arguments that are not one JSON object make the call invalid (`malformed`), never a success. The JSON object
writer streams key/value members whose pieces concatenate into valid JSON."""

from __future__ import annotations

import itertools
import json

import pytest

from maya_server.families.call_events import CallEmitter, JsonObjectWriter, escape_string_piece, json_text
from maya_server.neutral.events import ToolCallArgumentsDelta, ToolCallFinished, ToolCallInvalid, ToolCallStarted


def _emitter():
    events: list = []
    ids = (f"call_{n}" for n in itertools.count())
    return CallEmitter(lambda: next(ids), events), events


def test_calls_are_numbered_in_order_and_finish_with_the_joined_deltas():
    emitter, events = _emitter()
    emitter.start("a")
    for piece in ['{"x": ', "", "1}"]:
        emitter.delta(piece)
    emitter.finish()
    emitter.start("b")
    emitter.delta("{}")
    emitter.finish()
    assert events == [
        ToolCallStarted(0, "call_0", "a"), ToolCallArgumentsDelta(0, '{"x": '), ToolCallArgumentsDelta(0, "1}"),
        ToolCallFinished(0, '{"x": 1}'),
        ToolCallStarted(1, "call_1", "b"), ToolCallArgumentsDelta(1, "{}"), ToolCallFinished(1, "{}"),
    ]


@pytest.mark.parametrize("arguments", ["", "[1, 2]", '"text"', '{"x": 1', '{"x": 1}{}', "{'x': 1}"])
def test_arguments_that_are_not_one_json_object_make_the_call_malformed(arguments):
    emitter, events = _emitter()
    emitter.start("f")
    emitter.delta(arguments)
    emitter.finish()
    assert events[-1] == ToolCallInvalid(0, "malformed", "tool call arguments are not a JSON object")
    assert not any(isinstance(event, ToolCallFinished) for event in events)


@pytest.mark.parametrize("arguments", ['{"x": NaN}', '{"x": -Infinity}'])
def test_arguments_with_nan_or_infinity_are_not_json_and_make_the_call_malformed(arguments):
    emitter, events = _emitter()
    emitter.start("f")
    emitter.delta(arguments)
    emitter.finish()
    assert isinstance(events[-1], ToolCallInvalid) and events[-1].reason == "malformed"


def test_a_failure_before_any_call_started_has_no_index_and_deltas_outside_a_call_are_dropped():
    emitter, events = _emitter()
    emitter.delta("{}")
    emitter.fail("unterminated", "the turn ended inside a call")
    assert events == [ToolCallInvalid(None, "unterminated", "the turn ended inside a call")]
    emitter.start("f")
    emitter.fail("truncated", "limit")
    emitter.delta("late")
    assert events[-1] == ToolCallInvalid(0, "truncated", "limit")


def test_json_text_keeps_unicode_and_string_pieces_concatenate():
    assert json_text({"city": "Zürich"}) == '{"city": "Zürich"}'
    text = 'a "quoted"\n\\ line ✓\t'
    pieces = [escape_string_piece(text[i:i + 3]) for i in range(0, len(text), 3)]
    assert '"' + "".join(pieces) + '"' == json_text(text)


def test_the_object_writer_streams_members_into_one_valid_object():
    emitter, events = _emitter()
    emitter.start("f")
    writer = JsonObjectWriter(emitter)
    writer.key("city")
    writer.open_string()
    for piece in ['Par', 'is "', "\n"]:
        writer.string_piece(piece)
    writer.close_string()
    assert writer.has_key("city") and not writer.has_key("n")
    writer.key("n")
    writer.value([1, None, True])
    writer.close()
    emitter.finish()
    assert isinstance(events[-1], ToolCallFinished)
    assert json.loads(events[-1].arguments) == {"city": 'Paris "\n', "n": [1, None, True]}
    assert events[-1].arguments == '{"city": "Paris \\"\\n", "n": [1, null, true]}'  # json.dumps' own spacing


def test_an_object_writer_with_no_members_writes_an_empty_object():
    emitter, events = _emitter()
    emitter.start("f")
    JsonObjectWriter(emitter).close()
    emitter.finish()
    assert events[-1] == ToolCallFinished(0, "{}")
