"""DeepSeek-V4 output parsing (reasoning, text, DSML calls), checked against DeepSeek's own parser."""

from __future__ import annotations

import json

import pytest

from maya_server.neutral.conversation import Conversation
from maya_server.families.deepseek_v4 import DeepSeekV4Family
from maya_server.neutral.events import ReasoningDelta, ReasoningFinished, TextDelta, ToolCallArgumentsDelta

from tests.families.conversations import TOOLS, user
from tests.families.official import dsv4_encoding
from tests.families.streaming import calls, invalid, parse, parse_every_way, reasoning, text

DS = DeepSeekV4Family()
THINKING = Conversation((user("Hi"),), tools=TOOLS)
CHAT = Conversation((user("Hi"),), tools=TOOLS, reasoning_effort="none")
D = "｜DSML｜"


def invoke(name: str, *params: tuple[str, str, str]) -> str:
    body = "\n".join(f'<{D}parameter name="{k}" string="{s}">{v}</{D}parameter>' for k, s, v in params)
    return f'<{D}invoke name="{name}">\n{body}\n</{D}invoke>'


def block(*invokes: str) -> str:
    return f"\n\n<{D}tool_calls>\n" + "\n".join(invokes) + f"\n</{D}tool_calls>"


WEATHER = invoke("get_weather", ("city", "true", 'Zürich "centre"'), ("days", "false", "3"))
SEARCH = invoke(
    "search", ("filters", "false", '{"open": true, "stars": [4, 5]}'), ("fresh", "false", "false"), ("query", "true", "a\nb")
)
NOW = invoke("now")


def test_reasoning_then_text():
    events = parse_every_way(DS, THINKING, "Plan it.</think>The answer.")
    assert events == [ReasoningDelta("Plan it."), ReasoningFinished(), TextDelta("The answer.")]


def test_chat_mode_starts_as_text():
    assert parse_every_way(DS, CHAT, "Hi there.") == [TextDelta("Hi there.")]


@pytest.mark.parametrize("thinking", [True, False])
def test_calls_agree_with_deepseeks_parser(thinking):
    output = ("Check both.</think>" if thinking else "") + "Checking." + block(WEATHER, SEARCH, NOW)
    events = parse_every_way(DS, THINKING if thinking else CHAT, output)
    mode = "thinking" if thinking else "chat"
    official = dsv4_encoding().parse_message_from_completion_text(output + "<｜end▁of▁sentence｜>", mode)
    assert text(events) == official["content"]
    assert reasoning(events) == official["reasoning_content"]
    expected = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in official["tool_calls"]]
    assert calls(events) == expected
    assert expected[2] == ("now", {})


def test_string_values_stream():
    parser = DS.parser(CHAT, lambda: "c")
    parser.feed(f'<{D}tool_calls>\n<{D}invoke name="get_weather">\n<{D}parameter name="city" string="true">Zü')
    events = parser.feed("rich</")
    assert [e.text for e in events if isinstance(e, ToolCallArgumentsDelta)] == ["rich"]


@pytest.mark.parametrize("inner, index", [
    (f'<{D}invoke name="x">\n<{D}parameter name="a">1</{D}parameter>\n</{D}invoke>', 0),
    (f'<{D}invoke name="x">\n<{D}parameter name="a" string="false">not json</{D}parameter>\n</{D}invoke>', 0),
    (f'<{D}invoke name="x">\n<{D}parameter name="a" string="true">1</{D}parameter>\n', 0),
    (f'<{D}invoke name="x">\n<{D}parameter name="a" string="true">1\n</{D}invoke>', 0),
    (f'<{D}invoke name="x">\nstray\n</{D}invoke>', 0),
    (f'<{D}invoke name="x">\n' + f'<{D}parameter name="a" string="true">1</{D}parameter>' * 2 + f"\n</{D}invoke>", 0),
    (f'<{D}invoke name="">\n</{D}invoke>', None),
    (f"<{D}invoke name=x>\n</{D}invoke>", None),
    (f"junk<{D}invoke name=\"x\">\n</{D}invoke>", None),
])
def test_malformed_calls(inner, index):
    output = f"<{D}tool_calls>\n{inner}\n</{D}tool_calls>After"
    events = parse_every_way(DS, CHAT, output)
    assert invalid(events) == [(index, "malformed")]
    assert calls(events) == []
    assert text(events) == "After"


@pytest.mark.parametrize("reason, expected", [("length", "truncated"), ("stop", "unterminated")])
@pytest.mark.parametrize("cut", [0, len(f'<{D}invoke name="get_w'), len(WEATHER) - 5])
def test_unfinished_call(reason, expected, cut):
    output = f"<{D}tool_calls>\n" + WEATHER[:cut]
    events = parse_every_way(DS, CHAT, output, reason)
    started = cut > len(f'<{D}invoke name="get_weather">')
    assert invalid(events) == [(0 if started else None, expected)]


def test_block_left_open_after_complete_calls_keeps_them():
    events = parse_every_way(DS, CHAT, f"<{D}tool_calls>\n{NOW}\n", "stop")
    assert calls(events) == [("now", {})]
    assert invalid(events) == []


def test_prose_mentioning_dsml_stays_text():
    output = f"DSML uses tool_calls and {D}invoke tags, e.g. </{D}tool_calls>."
    assert parse_every_way(DS, CHAT, output) == [TextDelta(output)]


def test_one_chunk_call():
    assert calls(parse(DS, CHAT, [f"<{D}tool_calls>{NOW}</{D}tool_calls>"])) == [("now", {})]
