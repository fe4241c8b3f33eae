"""ChatML renders token-for-token like Qwen3's official template (qwen-3 tokenizer).

Qwen2.5's template is checked too where it agrees with Qwen3 by design:
conversations that have a system prompt and no reasoning (Qwen2.5 injects a
default system prompt and knows no `<think>`).
"""

from __future__ import annotations

import pytest

from maya_server.families.chatml import ChatmlFamily

from tests.families.conversations import CONVERSATIONS, openai_messages, tool_dicts
from tests.families.official import official_ids, render_template

QWEN25_CASES = ("system", "developer", "tools_declared")


def official_text(model: str, conversation) -> str:
    kwargs = {"enable_thinking": False} if conversation.reasoning_effort == "none" else {}
    return render_template(model, openai_messages(conversation), tool_dicts(conversation), **kwargs)


def assert_golden(model_files, model: str, conversation) -> None:
    expected = official_text(model, conversation)
    prompt = ChatmlFamily().render(conversation)
    assert prompt.text == expected
    assert prompt.token_ids(model_files.ours(model)) == official_ids(model_files.file(model), expected)


@pytest.mark.parametrize("case", CONVERSATIONS)
def test_render_matches_qwen3(model_files, case):
    assert_golden(model_files, "qwen-3", CONVERSATIONS[case])


@pytest.mark.parametrize("case", QWEN25_CASES)
def test_render_matches_qwen25_where_they_agree(model_files, case):
    assert_golden(model_files, "qwen-2.5", CONVERSATIONS[case])
