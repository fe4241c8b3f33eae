"""`respelled`: an assistant turn spelled with the ids the model generated for it, only where they fit.

A real family renders (ChatML, GLM, DeepSeek-V4) and the scripted engine's real vocabulary tokenizes; the
"generated" ids split words where the tokenizer would not, as a model's sampling may.
"""

from __future__ import annotations

import pytest

from maya_server.engine.scripted import ScriptTokenizer
from maya_server.families import get_family
from maya_server.model.spelling import respelled
from maya_server.neutral.conversation import Conversation, Message, TextPart, ToolCall, ToolSpec

from tests.scripted import holds_run, piece_ids

WEATHER = ToolSpec("get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}})


def chat(*turns, tools=()) -> Conversation:
    return Conversation.from_request(tuple(turns), tools=tools, tool_choice="auto", reasoning_effort=None,
                                     parallel_tool_calls=None)


def user(text: str) -> Message:
    return Message("user", (TextPart(text),))


def assistant(text: str, *calls: ToolCall) -> Message:
    return Message("assistant", (TextPart(text),) if text else (), None, calls)


@pytest.mark.parametrize("family", ["chatml", "glm", "deepseek-v4"])
def test_a_generated_turn_is_spelled_with_its_own_ids_and_reads_the_same(family):
    tokenizer = ScriptTokenizer()
    answer = assistant("Hello there")
    prompt = get_family(family).render(chat(user("hi"), answer, user("and then?")))
    generated = piece_ids(tokenizer, "Hel", "lo", " the", "re")
    plain = prompt.token_ids(tokenizer)

    ids = respelled(prompt, tokenizer, {answer: generated}.get).token_ids(tokenizer)

    assert holds_run(ids, generated) and not holds_run(plain, generated)
    assert tokenizer.decode(ids) == tokenizer.decode(plain)  # the model reads the same text


def test_a_turn_without_kept_ids_and_ids_of_another_text_leave_the_prompt_as_it_was():
    tokenizer = ScriptTokenizer()
    answer = assistant("Hello there")
    prompt = get_family("chatml").render(chat(user("hi"), answer, user("and?")))
    plain = prompt.token_ids(tokenizer)

    assert respelled(prompt, tokenizer, lambda turn: None).token_ids(tokenizer) == plain
    other_text = piece_ids(tokenizer, "Good", "bye")
    assert respelled(prompt, tokenizer, {answer: other_text}.get).token_ids(tokenizer) == plain


def test_a_tool_call_spelled_with_its_control_tokens_where_the_family_writes_them():
    tokenizer = ScriptTokenizer()
    call = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
    answer = assistant("", call)
    prompt = get_family("chatml").render(chat(user("weather?"), answer, tools=(WEATHER,)))
    generated = piece_ids(tokenizer, "<tool_call>", "\n", '{"na', 'me": "', "get_weather", '", "arguments": ',
                        '{"city": "Paris"}', "}", "\n", "</tool_call>")
    assert tokenizer.decode(generated) in prompt.text

    ids = respelled(prompt, tokenizer, {answer: generated}.get).token_ids(tokenizer)

    assert holds_run(ids, generated)


def test_ids_that_would_make_plain_text_a_control_token_are_not_used():
    """The client's text spells `<tool_call>` as plain text; ids with the control token there never replace it."""
    tokenizer = ScriptTokenizer()
    answer = assistant("see <tool_call> here")
    prompt = get_family("chatml").render(chat(user("hi"), answer, user("ok"), tools=(WEATHER,)))
    generated = piece_ids(tokenizer, "see", " ", "<tool_call>", " here")
    assert tokenizer.decode(generated) == "see <tool_call> here"

    ids = respelled(prompt, tokenizer, {answer: generated}.get).token_ids(tokenizer)

    assert ids == prompt.token_ids(tokenizer)


def test_only_the_turns_own_span_is_searched():
    """The user quoting the assistant's words word for word is never spelled with the assistant's ids."""
    tokenizer = ScriptTokenizer()
    answer = assistant("Hello there")
    prompt = get_family("chatml").render(chat(user("hi"), answer, user("Hello there")))
    generated = piece_ids(tokenizer, "Hel", "lo", " the", "re")

    ids = respelled(prompt, tokenizer, {answer: generated}.get).token_ids(tokenizer)

    assert sum(ids[i:i + len(generated)] == generated for i in range(len(ids))) == 1
    assert ids[-12:] == prompt.token_ids(tokenizer)[-12:]  # the user's copy, at the end, is tokenized as before
