"""DeepSeek output parsing (reasoning, text, DSML calls), both families, each release's tag spelling, checked against
DeepSeek's own stream parser (deepseek-recipe's `StreamProcessor`) and the V4 preview encoder's parser."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

pytest.importorskip("deepseek_recipe", reason="DeepSeek's toolkit has no wheel for this platform")

from maya_server.families import get_family
from maya_server.neutral.conversation import Conversation
from maya_server.neutral.events import ReasoningDelta, ReasoningFinished, TextDelta, ToolCallArgumentsDelta

from tests.families.conversations import TOOLS, user
from tests.families.deepseek_recipe_oracle import parse_completion
from tests.families.official import dsv4_encoding
from tests.families.streaming import calls, invalid, parse, parse_every_way, reasoning, text

THINKING = Conversation((user("Hi"),), tools=TOOLS)
CHAT = Conversation((user("Hi"),), tools=TOOLS, reasoning_effort="none")
D = "｜DSML｜"


@dataclass(frozen=True)
class Spelling:
    """One release's DSML, to write model output with: V4's `tool_calls`, or V4.1's tags with a space."""

    block: str
    space: str

    def invoke(self, name: str, *params: tuple[str, str, str]) -> str:
        p = self.space + "parameter"
        body = "\n".join(f'<{D}{p} name="{k}" string="{s}">{v}</{D}{p}>' for k, s, v in params)
        return f'<{D}{self.space}invoke name="{name}">\n{body}\n</{D}{self.space}invoke>'

    @property
    def open(self) -> str:
        return f"<{D}{self.block}>"

    @property
    def close(self) -> str:
        return f"</{D}{self.block}>"

    def block_of(self, *invokes: str) -> str:
        return f"\n\n{self.open}\n" + "\n".join(invokes) + f"\n{self.close}"

    def calls_three(self) -> str:
        weather = self.invoke("get_weather", ("city", "true", 'Zürich "centre"'), ("days", "false", "3"))
        search = self.invoke("search", ("filters", "false", '{"open": true, "stars": [4, 5]}'),
                             ("fresh", "false", "false"), ("query", "true", "a\nb"))
        return self.block_of(weather, search, self.invoke("now"))


V4, V41 = Spelling("tool_calls", ""), Spelling(" calls", " ")
CASES = [("deepseek-v4", V4), ("deepseek-v4.1", V41)]
"""Each family with its own release's spelling (`test_either_releases_spelling_is_a_call` crosses them)."""


@pytest.mark.parametrize("family", ["deepseek-v4", "deepseek-v4.1"])
def test_reasoning_then_text(family):
    events = parse_every_way(get_family(family), THINKING, "Plan it.</think>The answer.")
    assert events == [ReasoningDelta("Plan it."), ReasoningFinished(), TextDelta("The answer.")]
    assert parse_every_way(get_family(family), CHAT, "Hi there.") == [TextDelta("Hi there.")]


@pytest.mark.parametrize("family, spelling", CASES)
@pytest.mark.parametrize("thinking", [True, False])
def test_calls_agree_with_deepseeks_parser(family, spelling, thinking):
    output = ("Check both.</think>" if thinking else "") + "Checking." + spelling.calls_three()
    events = parse_every_way(get_family(family), THINKING if thinking else CHAT, output)
    official = parse_completion(family, output, thinking=thinking)
    assert len(official["calls"]) == 3 and official["calls"][2] == ("now", {})
    assert text(events) == official["content"]
    assert reasoning(events) == official["reasoning"]
    assert calls(events) == official["calls"]


@pytest.mark.parametrize("thinking", [True, False])
def test_v4_calls_agree_with_the_preview_encoders_parser(thinking):
    output = ("Check both.</think>" if thinking else "") + "Checking." + V4.calls_three()
    events = parse_every_way(get_family("deepseek-v4"), THINKING if thinking else CHAT, output)
    mode = "thinking" if thinking else "chat"
    official = dsv4_encoding().parse_message_from_completion_text(output + "<｜end▁of▁sentence｜>", mode)
    assert text(events) == official["content"] and reasoning(events) == official["reasoning_content"]
    assert calls(events) == [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                             for c in official["tool_calls"]]


@pytest.mark.parametrize("family", ["deepseek-v4.1", "deepseek-v4"])
@pytest.mark.parametrize("output", [
    f'Answer\n\n<{D}tool_calls>\n<{D}invoke name="now">\n</{D}invoke>\n</{D}tool_calls>',
    f'Answer\n\n<{D} calls>\n<{D} invoke name="now">\n</{D} invoke>\n</{D} calls>',
    f'Answer\n\n<{D}tool_calls>\n<{D} invoke name="now">\n</{D} invoke>\n</{D}tool_calls>',
])
def test_either_releases_spelling_is_a_call(family, output):
    """DeepSeek's stream parser reads V4's and V4.1's tags in either family's output: so does Maya's."""
    official = parse_completion(family, output, thinking=False)
    events = parse_every_way(get_family(family), CHAT, output)
    assert calls(events) == official["calls"] == [("now", {})]
    assert text(events) == official["content"] == "Answer"


@pytest.mark.parametrize("family, spelling", CASES)
def test_string_values_stream(family, spelling):
    parser = get_family(family).parser(CHAT, lambda: "c")
    s = spelling.space
    parser.feed(f'{spelling.open}\n<{D}{s}invoke name="get_weather">\n<{D}{s}parameter name="city" string="true">Zü')
    events = parser.feed("rich</")
    assert [e.text for e in events if isinstance(e, ToolCallArgumentsDelta)] == ["rich"]


def _malformed(s: str) -> list[tuple[str, int | None]]:
    i, p = f"{s}invoke", f"{s}parameter"
    return [
        (f'<{D}{i} name="x">\n<{D}{p} name="a">1</{D}{p}>\n</{D}{i}>', 0),
        (f'<{D}{i} name="x">\n<{D}{p} name="a" string="false">not json</{D}{p}>\n</{D}{i}>', 0),
        (f'<{D}{i} name="x">\n<{D}{p} name="a" string="true">1</{D}{p}>\n', 0),
        (f'<{D}{i} name="x">\n<{D}{p} name="a" string="true">1\n</{D}{i}>', 0),
        (f'<{D}{i} name="x">\nstray\n</{D}{i}>', 0),
        (f'<{D}{i} name="x">\n' + f'<{D}{p} name="a" string="true">1</{D}{p}>' * 2 + f"\n</{D}{i}>", 0),
        (f'<{D}{i} name="">\n</{D}{i}>', None),
        (f"<{D}{i} name=x>\n</{D}{i}>", None),
        (f'junk<{D}{i} name="x">\n</{D}{i}>', None),
    ]


@pytest.mark.parametrize("family, spelling, inner, index", [
    (family, spelling, inner, index) for family, spelling in CASES for inner, index in _malformed(spelling.space)
])
def test_malformed_calls(family, spelling, inner, index):
    events = parse_every_way(get_family(family), CHAT, f"{spelling.open}\n{inner}\n{spelling.close}After")
    assert invalid(events) == [(index, "malformed")]
    assert calls(events) == []
    assert text(events) == "After"


@pytest.mark.parametrize("family, spelling", CASES)
@pytest.mark.parametrize("reason, expected", [("length", "truncated"), ("stop", "unterminated")])
@pytest.mark.parametrize("cut", ["none", "name", "value"])
def test_unfinished_call(family, spelling, reason, expected, cut):
    weather = spelling.invoke("get_weather", ("city", "true", "Paris"), ("days", "false", "3"))
    head = f'<{D}{spelling.space}invoke name="get_weather">'
    end = {"none": 0, "name": len(head) - 6, "value": len(weather) - 5}[cut]
    events = parse_every_way(get_family(family), CHAT, f"{spelling.open}\n" + weather[:end], reason)
    assert invalid(events) == [(0 if end > len(head) else None, expected)]


@pytest.mark.parametrize("family, spelling", CASES)
def test_block_left_open_after_complete_calls_keeps_them(family, spelling):
    events = parse_every_way(get_family(family), CHAT, f"{spelling.open}\n{spelling.invoke('now')}\n", "stop")
    assert calls(events) == [("now", {})]
    assert invalid(events) == []


@pytest.mark.parametrize("family", ["deepseek-v4", "deepseek-v4.1"])
def test_prose_mentioning_dsml_stays_text(family):
    output = f"DSML uses tool_calls and {D}invoke tags, e.g. </{D}tool_calls> or <{D} invoke."
    assert parse_every_way(get_family(family), CHAT, output) == [TextDelta(output)]


@pytest.mark.parametrize("family, spelling", CASES)
def test_one_chunk_call_and_parallel_calls(family, spelling):
    ds = get_family(family)
    assert calls(parse(ds, CHAT, [f"{spelling.open}{spelling.invoke('now')}{spelling.close}"])) == [("now", {})]
    both = spelling.block_of(spelling.invoke("get_weather", ("city", "true", "Oslo")), spelling.invoke("now"))
    assert [name for name, _ in calls(parse_every_way(ds, CHAT, both))] == ["get_weather", "now"]
