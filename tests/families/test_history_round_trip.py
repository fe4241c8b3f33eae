"""What a family writes for an assistant turn in history, its parser reads back as the same turn."""

from __future__ import annotations

import json

import pytest

from maya_server.neutral.conversation import Conversation
from maya_server.families import get_family

from tests.families.conversations import CONVERSATIONS, TOOLS, user
from tests.families.streaming import calls, parse_every_way, reasoning, text

# (family, the text that opens the replayed assistant turn, the text that ends it)
FRAMES = {
    "glm": ("<|assistant|><think>", "<|observation|>"),
    "glm-4.7": ("<|assistant|><think>", "<|observation|>"),
    "chatml": ("<|im_start|>assistant\n", "<|im_end|>"),
    "deepseek-v4": ("<｜Assistant｜><think>", "<｜end▁of▁sentence｜>"),
}


@pytest.mark.parametrize("name", FRAMES)
def test_replayed_calls_parse_back(name):
    family = get_family(name)
    history = CONVERSATIONS["multi_step_loop"]  # both assistant turns replay their reasoning
    opener, closer = FRAMES[name]
    prompt = family.render(history).text
    second_turn = prompt.index(opener, prompt.index(opener) + 1)
    start = second_turn + len(opener)
    assistant_turn = prompt[start:prompt.index(closer, start)]
    events = parse_every_way(family, Conversation((user("Hi"),), tools=TOOLS), assistant_turn)
    expected = history.turns[3]
    assert reasoning(events) == expected.reasoning
    assert text(events) == expected.text
    assert calls(events) == [(c.name, json.loads(c.arguments)) for c in expected.tool_calls]
