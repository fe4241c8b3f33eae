"""DeepSeek-V4.1 output parsing (reasoning, text, V4.1's spaced DSML calls), checked against DeepSeek's own stream
parser (deepseek-recipe's `StreamProcessor`); the rules the V4 parser keeps hold with V4.1's tags too."""

from __future__ import annotations

import pytest

pytest.importorskip("deepseek_recipe", reason="DeepSeek's toolkit has no wheel for this platform")

from maya_server.families import get_family
from maya_server.neutral.conversation import Conversation
from maya_server.neutral.events import ReasoningDelta, ReasoningFinished, TextDelta, ToolCallArgumentsDelta

from tests.families.conversations import TOOLS, user
from tests.families.deepseek_recipe_oracle import parse_completion
from tests.families.streaming import calls, invalid, parse, parse_every_way, reasoning, text

DS = get_family("deepseek-v4.1")
THINKING = Conversation((user("Hi"),), tools=TOOLS)
CHAT = Conversation((user("Hi"),), tools=TOOLS, reasoning_effort="none")
D = "｜DSML｜"
OPEN, CLOSE = f"<{D} calls>", f"</{D} calls>"


def invoke(name: str, *params: tuple[str, str, str]) -> str:
    body = "\n".join(f'<{D} parameter name="{k}" string="{s}">{v}</{D} parameter>' for k, s, v in params)
    return f'<{D} invoke name="{name}">\n{body}\n</{D} invoke>'


def block(*invokes: str) -> str:
    return f"\n\n{OPEN}\n" + "\n".join(invokes) + f"\n{CLOSE}"


WEATHER = invoke("get_weather", ("city", "true", 'Zürich "centre"'), ("days", "false", "3"))
SEARCH = invoke(
    "search", ("filters", "false", '{"open": true, "stars": [4, 5]}'), ("fresh", "false", "false"), ("query", "true", "a\nb")
)
NOW = invoke("now")


def test_reasoning_then_text():
    events = parse_every_way(DS, THINKING, "Plan it.</think>The answer.")
    assert events == [ReasoningDelta("Plan it."), ReasoningFinished(), TextDelta("The answer.")]


@pytest.mark.parametrize("thinking", [True, False])
def test_calls_agree_with_deepseeks_parser(thinking):
    output = ("Check both.</think>" if thinking else "") + "Checking." + block(WEATHER, SEARCH, NOW)
    events = parse_every_way(DS, THINKING if thinking else CHAT, output)
    official = parse_completion("deepseek-v4.1", output, thinking=thinking)
    assert len(official["calls"]) == 3
    assert text(events) == official["content"]
    assert reasoning(events) == official["reasoning"]
    assert calls(events) == official["calls"]


@pytest.mark.parametrize("family", ["deepseek-v4.1", "deepseek-v4"])
@pytest.mark.parametrize("output", [
    f'Answer\n\n<{D}tool_calls>\n<{D}invoke name="now">\n</{D}invoke>\n</{D}tool_calls>',
    f'Answer\n\n{OPEN}\n<{D} invoke name="now">\n</{D} invoke>\n{CLOSE}',
    f'Answer\n\n<{D}tool_calls>\n<{D} invoke name="now">\n</{D} invoke>\n</{D}tool_calls>',
])
def test_either_releases_spelling_is_a_call(family, output):
    """DeepSeek's stream parser reads V4's and V4.1's tags in either family's output: so does Maya's."""
    official = parse_completion(family, output, thinking=False)
    events = parse_every_way(get_family(family), CHAT, output)
    assert calls(events) == official["calls"] == [("now", {})]
    assert text(events) == official["content"] == "Answer"


def test_parallel_calls_are_each_their_own():
    events = parse_every_way(DS, CHAT, block(WEATHER, NOW))
    assert [name for name, _ in calls(events)] == ["get_weather", "now"]


def test_string_values_stream():
    parser = DS.parser(CHAT, lambda: "c")
    parser.feed(f'{OPEN}\n<{D} invoke name="get_weather">\n<{D} parameter name="city" string="true">Zü')
    events = parser.feed("rich</")
    assert [e.text for e in events if isinstance(e, ToolCallArgumentsDelta)] == ["rich"]


@pytest.mark.parametrize("inner, index", [
    (f'<{D} invoke name="x">\n<{D} parameter name="a">1</{D} parameter>\n</{D} invoke>', 0),
    (f'<{D} invoke name="x">\n<{D} parameter name="a" string="false">not json</{D} parameter>\n</{D} invoke>', 0),
    (f'<{D} invoke name="x">\n<{D} parameter name="a" string="true">1\n</{D} invoke>', 0),
    (f'<{D} invoke name="x">\n' + f'<{D} parameter name="a" string="true">1</{D} parameter>' * 2 + f"\n</{D} invoke>", 0),
    (f'<{D} invoke name="">\n</{D} invoke>', None),
    (f'junk<{D} invoke name="x">\n</{D} invoke>', None),
])
def test_malformed_calls(inner, index):
    events = parse_every_way(DS, CHAT, f"{OPEN}\n{inner}\n{CLOSE}After")
    assert invalid(events) == [(index, "malformed")]
    assert calls(events) == []
    assert text(events) == "After"


@pytest.mark.parametrize("reason, expected", [("length", "truncated"), ("stop", "unterminated")])
@pytest.mark.parametrize("cut", [0, len(f'<{D} invoke name="get_w'), len(WEATHER) - 5])
def test_unfinished_call(reason, expected, cut):
    events = parse_every_way(DS, CHAT, f"{OPEN}\n" + WEATHER[:cut], reason)
    started = cut > len(f'<{D} invoke name="get_weather">')
    assert invalid(events) == [(0 if started else None, expected)]


def test_one_chunk_call():
    assert calls(parse(DS, CHAT, [f"{OPEN}{NOW}{CLOSE}"])) == [("now", {})]
