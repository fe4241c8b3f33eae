"""The parser's record of the model's own text (`StreamParser.record_raw` / `take_raw`), which a background task's
log keeps so that a turn cut short is written back as the model wrote it: whatever the split of the output, the
pieces put together are exactly the text read, a piece is a tag where the parser read one, and each piece says
how many of the events returned came before it (so the pipeline puts it before the events it made)."""

from __future__ import annotations

import pytest

from maya_server.families import FAMILY_NAMES, get_family
from maya_server.neutral.conversation import Conversation, Message, TextPart, ToolSpec
from tests.responses.test_resumable import ANSWERS, EMPTY_REASONING

CONVERSATION = Conversation(
    turns=(Message("user", (TextPart("Weather in Paris?"),)),),
    tools=(ToolSpec("lookup", "", {"type": "object", "properties": {"city": {"type": "string"},
                                                                    "days": {"type": "integer"},
                                                                    "units": {"type": "string"}}}),),
)
CASES = [(family, ANSWERS[family]) for family in ("chatml", "glm", "deepseek-v4") if family in FAMILY_NAMES]
CASES += [("glm", EMPTY_REASONING)]
if "deepseek-v4.1" in FAMILY_NAMES:
    CASES.append(("deepseek-v4.1", ANSWERS["deepseek-v4.1"]))


@pytest.mark.parametrize("family, answer", CASES)
@pytest.mark.parametrize("step", [1, 3, 7, 1000])
def test_the_raw_pieces_are_the_text_read_and_each_comes_before_the_events_it_made(family, answer, step):
    parser = get_family(family).parser(CONVERSATION, lambda: "call_x")
    parser.record_raw()
    pieces, events = [], 0
    for start in range(0, len(answer), step):
        made = parser.feed(answer[start:start + step])
        taken = parser.take_raw()
        assert all(0 <= position <= len(made) for position, _, _ in taken)
        assert [position for position, _, _ in taken] == sorted(position for position, _, _ in taken)
        pieces += taken
        events += len(made)
    parser.finish("stop")
    pieces += parser.take_raw()
    assert "".join(text for _, text, _ in pieces) == answer
    tags = [text for _, text, tag in pieces if tag]
    assert "</think>" in tags and all(tag in answer for tag in tags)
    assert any(tag.startswith(("<tool_call>", "<｜DSML｜")) for tag in tags) or answer == EMPTY_REASONING
    assert events > 0


def test_a_parser_asked_for_nothing_keeps_nothing():
    parser = get_family("glm").parser(CONVERSATION, lambda: "call_x")
    parser.feed(ANSWERS["glm"])
    assert parser.take_raw() == []
