"""DeepSeek-V4 renders token-for-token like DeepSeek's own encoding_dsv4.py.

The encoder takes OpenAI-style messages; tools go on the opening system
message (an empty one is added when there is none, our documented placement),
reasoning history is dropped as its defaults say, and effort maps as in the
family's docstring.
"""

from __future__ import annotations

import pytest

from maya_server.families.deepseek_v4 import DeepSeekV4Family

from tests.families.conversations import CONVERSATIONS, openai_messages, tool_dicts
from tests.families.official import dsv4_encoding, official_ids

MODEL = "deepseek-v4"


def official_text(conversation) -> str:
    messages = openai_messages(conversation, arguments_as_text=True)
    if conversation.tools:
        if not messages or messages[0]["role"] != "system":
            messages.insert(0, {"role": "system", "content": ""})
        messages[0]["tools"] = tool_dicts(conversation)
    thinking = conversation.reasoning_effort != "none"
    effort = "max" if conversation.reasoning_effort == "xhigh" else None
    return dsv4_encoding().encode_messages(messages, thinking_mode="thinking" if thinking else "chat", reasoning_effort=effort)


@pytest.mark.parametrize("case", CONVERSATIONS)
def test_render_matches_encoder(model_files, case):
    conversation = CONVERSATIONS[case]
    expected = official_text(conversation)
    prompt = DeepSeekV4Family().render(conversation)
    assert prompt.text == expected
    assert prompt.token_ids(model_files.ours(MODEL)) == official_ids(model_files.file(MODEL), expected)
