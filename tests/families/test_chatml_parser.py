"""ChatML / Hermes output parsing (Qwen3-style `<think>` and `<tool_call>` JSON)."""

from __future__ import annotations

import pytest

from maya_server.neutral.conversation import Conversation
from maya_server.families.chatml import ChatmlFamily
from maya_server.neutral.events import ReasoningDelta, ReasoningFinished, TextDelta, ToolCallArgumentsDelta, ToolCallStarted

from tests.families.conversations import TOOLS, user
from tests.families.streaming import calls, invalid, parse, parse_every_way, reasoning, text

CHATML = ChatmlFamily()
CONVERSATION = Conversation((user("Hi"),), tools=TOOLS)


def test_plain_text():
    assert parse_every_way(CHATML, CONVERSATION, "Hello! How can I help?") == [TextDelta("Hello! How can I help?")]


def test_model_opened_reasoning_then_text():
    events = parse_every_way(CHATML, CONVERSATION, "<think>\nLet me see.\n</think>\n\nThe answer.")
    assert events == [ReasoningDelta("Let me see."), ReasoningFinished(), TextDelta("The answer.")]


def test_think_tag_later_in_text_is_text():
    output = "Models write <think> blocks."
    assert parse_every_way(CHATML, CONVERSATION, output) == [TextDelta(output)]


def test_reasoning_text_then_calls():
    output = (
        "<think>\nweather first\n</think>\n\nSure.\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>\n'
        '<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>'
    )
    events = parse_every_way(CHATML, CONVERSATION, output)
    assert reasoning(events) == "weather first"
    assert text(events) == "Sure."
    assert calls(events) == [("get_weather", {"city": "Paris", "days": 3}), ("now", {})]
    deltas = [e.text for e in events if isinstance(e, ToolCallArgumentsDelta)]
    assert deltas == ['{"city": "Paris", "days": 3}', "{}"]


def test_arguments_stream_while_generated():
    parser = CHATML.parser(CONVERSATION, lambda: "call_x")
    first = parser.feed('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par')
    assert first == [ToolCallStarted(0, "call_x", "get_weather"), ToolCallArgumentsDelta(0, '{"city": "Par')]
    assert parser.feed('is"}}') == [ToolCallArgumentsDelta(0, 'is"}')]


def test_braces_inside_strings():
    arguments = '{"code": "if (a) { b(); } \\" }", "n": {"m": [1, {"k": "}"}]}}'
    events = parse_every_way(CHATML, CONVERSATION, f'<tool_call>{{"name": "run", "arguments": {arguments}}}</tool_call>')
    assert [e.text for e in events if isinstance(e, ToolCallArgumentsDelta)] == [arguments]
    assert calls(events) == [("run", {"code": 'if (a) { b(); } " }', "n": {"m": [1, {"k": "}"}]}})]


@pytest.mark.parametrize("body, arguments", [
    ('{"arguments": {"a": 1}, "name": "x"}', {"a": 1}),
    ('{"name": "x", "arguments": "{\\"a\\": 1}"}', {"a": 1}),
    ('{"name": "x"}', {}),
])
def test_other_shapes_parse_when_the_block_closes(body, arguments):
    events = parse_every_way(CHATML, CONVERSATION, f"<tool_call>{body}</tool_call>")
    assert calls(events) == [("x", arguments)]


@pytest.mark.parametrize("body, index", [
    ("not json", None),
    ('{"name": "x", "arguments": [1]}', None),
    ('{"name": "", "arguments": {}}', None),
    ('{"name": "x", "arguments": {"a": 1}', 0),
    ('{"name": "x", "arguments": {"a": tru}}', 0),
    ('{"name": "x", "arguments": {"a": 1}} {"name": "y"}', 0),
    ('{"name": "x", "arguments": {}}<tool_call>', 0),
])
def test_malformed_calls(body, index):
    events = parse_every_way(CHATML, CONVERSATION, f"<tool_call>{body}</tool_call>After")
    assert invalid(events) == [(index, "malformed")]
    assert calls(events) == []
    assert text(events) == "After"


@pytest.mark.parametrize("reason, expected", [("length", "truncated"), ("stop", "unterminated")])
def test_unfinished_call(reason, expected):
    events = parse_every_way(CHATML, CONVERSATION, '<tool_call>\n{"name": "now", "arguments": {"a"', reason)
    assert invalid(events) == [(0, expected)]


def test_prose_mentioning_tags_stays_text():
    output = "Wrap calls in tool_call tags; a </tool_call> alone or <tool_call without a bracket is text."
    assert parse_every_way(CHATML, CONVERSATION, output) == [TextDelta(output)]


def test_one_chunk_call():
    events = parse(CHATML, CONVERSATION, ['<tool_call>{"name": "now", "arguments": {}}</tool_call>'])
    assert calls(events) == [("now", {})]
