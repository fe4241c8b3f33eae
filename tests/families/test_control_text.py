"""`ControlVocabulary.write`: a template's literal text with the family's added tokens as control segments
and everything else plain, so the prompt reads as the official template tokenizes it.

Pins: every occurrence becomes a control segment, the longest token wins where tokens overlap, tokens
are matched literally (regex metacharacters and full-width characters such as DSML's `｜`), and the
written text is exactly the literal: nothing dropped, nothing added.
"""

from __future__ import annotations

import pytest

from maya_server.families.control_text import ControlVocabulary
from maya_server.model.tokenizer import PromptBuilder, Segment


def written(tokens, literal: str) -> list[Segment]:
    builder = PromptBuilder()
    ControlVocabulary(tokens).write(builder, literal)
    prompt = builder.build()
    assert prompt.text == literal
    return [segment for segment in prompt.segments if segment.text]


def test_each_token_becomes_a_control_segment_and_the_rest_is_plain():
    assert written(["<tool_call>", "</tool_call>"], "Call: <tool_call>{...}</tool_call> done") == [
        Segment("Call: "), Segment("<tool_call>", True), Segment("{...}"), Segment("</tool_call>", True),
        Segment(" done"),
    ]


def test_adjacent_and_repeated_tokens_are_each_control():
    assert written(["<a>"], "<a><a>x<a>") == [Segment("<a>", True), Segment("<a>", True), Segment("x"),
                                             Segment("<a>", True)]


def test_the_longest_token_wins_where_tokens_overlap():
    segments = written(["<｜DSML｜", "<｜DSML｜invoke", "｜DSML｜"], "<｜DSML｜invoke name=x/<｜DSML｜ ｜DSML｜")
    assert [s.text for s in segments if s.control] == ["<｜DSML｜invoke", "<｜DSML｜", "｜DSML｜"]


@pytest.mark.parametrize("token", ["[INST]", "a|b", "<|im_end|>", "(.*)", "\\n"])
def test_tokens_are_matched_literally_not_as_patterns(token):
    assert written([token], f"x{token}y") == [Segment("x"), Segment(token, True), Segment("y")]
    assert all(not s.control for s in written([token], "xy ab [I] n"))


def test_text_without_tokens_is_one_plain_segment():
    assert written(["<tool_call>"], "Use the tools ✓ <tool_call") == [Segment("Use the tools ✓ <tool_call")]


def test_duplicate_tokens_are_harmless():
    assert written(["<a>", "<a>"], "1<a>2") == [Segment("1"), Segment("<a>", True), Segment("2")]
