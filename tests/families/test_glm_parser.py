"""GLM output parsing: every split gives the same events; malformed calls are never successes."""

from __future__ import annotations

import pytest

from maya_server.neutral.conversation import Conversation
from maya_server.families.glm import GlmFamily
from maya_server.neutral.events import ReasoningDelta, ReasoningFinished, TextDelta, ToolCallArgumentsDelta, ToolCallFinished, ToolCallStarted

from tests.families.conversations import TOOLS, user
from tests.families.streaming import calls, invalid, parse, parse_every_way, reasoning, text

GLM = GlmFamily()
THINKING = Conversation((user("Hi"),), tools=TOOLS)
NOT_THINKING = Conversation((user("Hi"),), tools=TOOLS, reasoning_effort="none")

WEATHER_CALL = (
    "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
    "<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>"
)


def test_reasoning_then_text():
    events = parse_every_way(GLM, THINKING, "Let me think.\n</think>\nHello there.")
    assert events == [ReasoningDelta("Let me think."), ReasoningFinished(), TextDelta("Hello there.")]


def test_thinking_off_starts_as_text():
    events = parse_every_way(GLM, NOT_THINKING, "Hello <b>there</b>.")
    assert events == [TextDelta("Hello <b>there</b>.")]


def test_reasoning_text_then_calls():
    output = "Need the weather.</think>Checking now.\n" + WEATHER_CALL + "<tool_call>now</tool_call>"
    events = parse_every_way(GLM, THINKING, output)
    assert reasoning(events) == "Need the weather."
    assert text(events) == "Checking now."
    assert calls(events) == [("get_weather", {"city": "Paris", "days": 3}), ("now", {})]
    assert events[1] == ReasoningFinished()
    assert events[3] == ToolCallStarted(0, "call_0", "get_weather")
    assert events[-2:] == [ToolCallArgumentsDelta(1, "{}"), ToolCallFinished(1, "{}")]


def test_string_values_stream_before_the_call_ends():
    parser = GLM.parser(THINKING, lambda: "call_x")
    parser.feed("</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Par")
    events = parser.feed("is, Fra")
    assert [e.text for e in events if isinstance(e, ToolCallArgumentsDelta)] == ["is, Fra"]


def test_arguments_are_typed_by_schema():
    output = (
        "</think><tool_call>search<arg_key>query</arg_key><arg_value>42</arg_value>"
        '<arg_key>filters</arg_key><arg_value>{"open": true}</arg_value>'
        "<arg_key>top_k</arg_key><arg_value>2.5</arg_value><arg_key>fresh</arg_key><arg_value>false</arg_value>"
        '<arg_key>tags</arg_key><arg_value>["a"]</arg_value><arg_key>extra</arg_key><arg_value>7</arg_value>'
        "</tool_call><tool_call>get_weather<arg_key>city</arg_key><arg_value>\"Quoted\" \\ city</arg_value>"
        "<arg_key>units</arg_key><arg_value>null</arg_value><arg_key>days</arg_key><arg_value>three</arg_value></tool_call>"
    )
    events = parse_every_way(GLM, THINKING, output)
    assert calls(events) == [
        ("search", {"query": "42", "filters": {"open": True}, "top_k": 2.5, "fresh": False, "tags": ["a"], "extra": 7}),
        ("get_weather", {"city": '"Quoted" \\ city', "units": None, "days": "three"}),
    ]


def test_glm45_style_whitespace_between_elements():
    output = "</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>"
    events = parse_every_way(GLM, THINKING, output)
    assert calls(events) == [("get_weather", {"city": "Oslo"})]
    assert text(events) == ""


def test_start_and_end_in_one_chunk():
    events = parse(GLM, NOT_THINKING, ["<tool_call>now</tool_call>"])
    assert calls(events) == [("now", {})]


@pytest.mark.parametrize("output, expected", [
    ("<tool_call><arg_key>city</arg_key><arg_value>x</arg_value></tool_call>After", [(None, "malformed")]),
    ("<tool_call></tool_call>After", [(None, "malformed")]),
    ("<tool_call>get weather<arg_key>city</arg_key></tool_call>After", [(None, "malformed")]),
    ('<tool_call>{"name": "now"}</tool_call>After', [(None, "malformed")]),
    ("<tool_call>get_weather<arg_value>x</arg_value></tool_call>After", [(None, "malformed")]),
    ("<tool_call>get_weather<arg_key>city</arg_key>oops<arg_value>x</arg_value></tool_call>After", [(0, "malformed")]),
    ("<tool_call>get_weather<arg_key>city</arg_key><arg_value>x</tool_call>After", [(0, "malformed")]),
    ("<tool_call>get_weather<arg_key>city</arg_key><arg_value>a</arg_value>"
     "<arg_key>city</arg_key><arg_value>b</arg_value></tool_call>After", [(0, "malformed")]),
    ("<tool_call>now stray text</tool_call>After", [(None, "malformed")]),
])
def test_malformed_calls(output, expected):
    events = parse_every_way(GLM, NOT_THINKING, output)
    assert invalid(events) == expected
    assert calls(events) == []
    assert text(events) == "After"


def test_malformed_call_then_valid_call():
    output = "<tool_call></tool_call><tool_call>now</tool_call>"
    events = parse_every_way(GLM, NOT_THINKING, output)
    assert invalid(events) == [(None, "malformed")]
    assert calls(events) == [("now", {})]


@pytest.mark.parametrize("reason, expected", [("length", "truncated"), ("stop", "unterminated")])
@pytest.mark.parametrize("cut", [len("<tool_call>get_wea"), len("<tool_call>get_weather<arg_key>ci"), len(WEATHER_CALL) - 3])
def test_unfinished_call(reason, expected, cut):
    events = parse_every_way(GLM, NOT_THINKING, WEATHER_CALL[:cut], reason)
    started = any(isinstance(e, ToolCallStarted) for e in events)
    assert invalid(events) == [(0 if started else None, expected)]
    assert calls(events) == []


def test_prose_mentioning_tags_stays_text():
    output = "Use tool_call blocks: write <tool_call without closing, or </tool_call> and <arg_key>."
    events = parse_every_way(GLM, NOT_THINKING, output)
    assert events == [TextDelta(output)]


def test_partial_tag_at_the_end_is_text():
    assert parse_every_way(GLM, NOT_THINKING, "Bye <tool_ca") == [TextDelta("Bye <tool_ca")]


def test_reasoning_cut_by_the_limit():
    events = parse_every_way(GLM, THINKING, "Still thinking about <tool_call>now</tool_call>", "length")
    assert events == [ReasoningDelta("Still thinking about <tool_call>now</tool_call>")]


def test_text_is_released_promptly():
    parser = GLM.parser(NOT_THINKING, lambda: "c")
    assert parser.feed("Hello wor") == [TextDelta("Hello wor")]
    assert parser.feed("ld <") == [TextDelta("ld")]
    assert parser.feed("b>") == [TextDelta(" <b>")]


JSON_FORM = '<tool_call>get_weather>{"city": "Paris", "days": 3}'


@pytest.mark.parametrize("variant", ["4.7", "5.1", "5.2", "5.3"])
@pytest.mark.parametrize("ending", ["</tool_call>", ""])
def test_the_json_argument_form_is_a_call_in_every_variant(variant, ending):
    events = parse_every_way(GlmFamily(variant), THINKING, "Weather.</think>" + JSON_FORM + ending)
    assert calls(events) == [("get_weather", {"city": "Paris", "days": 3})]
    assert text(events) == "" and reasoning(events) == "Weather."


def test_json_form_calls_follow_each_other_and_mix_with_the_tagged_form():
    output = "</think>" + WEATHER_CALL + JSON_FORM + '<tool_call>now>{}</tool_call>Done.'
    events = parse_every_way(GLM, THINKING, output)
    assert calls(events) == [("get_weather", {"city": "Paris", "days": 3}),
                             ("get_weather", {"city": "Paris", "days": 3}), ("now", {})]
    assert text(events) == "Done."


@pytest.mark.parametrize("arguments", ['{"city": "Paris"} thanks', '["Paris"]', '{"city": ', "Paris"])
def test_a_json_form_that_is_not_one_object_is_malformed(arguments):
    events = parse_every_way(GLM, THINKING, "</think><tool_call>get_weather>" + arguments + "</tool_call>")
    assert invalid(events) == [(0, "malformed")]
    assert calls(events) == []


def test_a_json_form_cut_off_by_the_output_limit_is_truncated():
    events = parse(GLM, THINKING, ['</think><tool_call>get_weather>{"city": "Par'], reason="length")
    assert invalid(events) == [(0, "truncated")]


GLM53 = GlmFamily("5.3")


@pytest.mark.parametrize("effort", [None, "none", "minimal", "low", "medium", "high", "xhigh"])
def test_glm53_always_starts_in_reasoning(effort):
    conversation = Conversation((user("Hi"),), tools=TOOLS, reasoning_effort=effort)
    events = parse_every_way(GLM53, conversation, "Thinking anyway.</think>4")
    assert reasoning(events) == "Thinking anyway." and text(events) == "4"


@pytest.mark.parametrize("variant", ["4.7", "5.1", "5.2"])
def test_earlier_variants_read_text_when_thinking_is_off(variant):
    events = parse_every_way(GlmFamily(variant), NOT_THINKING, "Hello.")
    assert events == [TextDelta("Hello.")]
