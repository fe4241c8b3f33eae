"""The `input` items of a Responses request, parsed by hand on `type` and `role` so every refusal names its
exact path: a string becomes one user message, each role takes only its own part kinds, the SDK's echoed
fields are dropped, and what Maya cannot serve (files, audio, item references, summaries, encrypted reasoning,
image details other than `auto`) is a 400 at the field that asked for it."""

from __future__ import annotations

import pytest

from maya_server.errors import InvalidRequestError
from maya_server.responses.request.items import (
    FunctionCallItem, FunctionCallOutputItem, InputImage, InputText, MessageItem, ReasoningItem, parse_input,
)


def _refused(raw) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as caught:
        parse_input(raw)
    assert caught.value.status == 400
    return caught.value


def test_a_string_is_one_user_message_with_one_text_part():
    assert parse_input("hi") == (MessageItem(role="user", content=[InputText(type="input_text", text="hi")]),)


def test_each_item_kind_parses_to_its_frozen_model():
    items = parse_input([
        {"role": "system", "content": "be brief"},
        {"type": None, "role": "user", "content": [{"type": "input_image", "image_url": "data:,x", "detail": "auto"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "async": False,
         "parsed_arguments": {}},
        {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "ok"}]},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "hm"}]},
    ])
    assert [type(item) for item in items] == [MessageItem, MessageItem, FunctionCallItem, FunctionCallOutputItem,
                                              ReasoningItem]
    assert items[1].content == [InputImage(type="input_image", image_url="data:,x", detail="auto")]


@pytest.mark.parametrize("raw, param", [
    (42, None),
    ({"role": "user"}, "input"),
    (["text"], "input[0]"),
    ([{"role": "tool", "content": "x"}], "input[0].role"),
    ([{"type": "web_search_call"}], "input[0].type"),
    ([{"content": "x"}], "input[0].type"),
    ([{"role": "system", "content": [{"type": "input_image", "image_url": "data:,x"}]}], "input[0].content[0].type"),
    ([{"role": "user", "content": [{"type": "output_text", "text": "x"}]}], "input[0].content[0].type"),
    ([{"role": "user", "content": [{"text": "x"}]}], "input[0].content[0].type"),
    ([{"role": "user", "content": ["x"]}], "input[0].content[0]"),
    ([{"role": "user", "content": [{"type": "input_text", "text": 3}]}], "input[0].content[0].text"),
    ([{"role": "user", "content": [{"type": "input_image"}]}], "input[0].content[0].image_url"),
    ([{"role": "user", "content": [{"type": "input_image", "image_url": "u", "detail": "high"}]}],
     "input[0].content[0].detail"),
    ([{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}], "input[0].content[0].file_id"),
    ([{"role": "user", "content": [{"type": "input_text", "text": "x", "prompt_cache_breakpoint": {}}]}],
     "input[0].content[0].prompt_cache_breakpoint"),
    ([{"type": "function_call", "call_id": "", "name": "f", "arguments": "{}"}], "input[0].call_id"),
    ([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "async": "yes"}],
     "input[0].async"),
    ([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "namespace": "n"}],
     "input[0].namespace"),
    ([{"type": "function_call_output", "call_id": "c", "output": [{"type": "refusal", "refusal": "no"}]}],
     "input[0].output[0].type"),
    ([{"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}]}], "input[0].summary"),
    ([{"type": "reasoning", "summary": [], "encrypted_content": "e"}], "input[0].encrypted_content"),
])
def test_a_bad_item_is_a_400_naming_its_exact_path(raw, param):
    error = _refused(raw)
    assert error.param == (param or "input")


def test_unsupported_part_kinds_say_why():
    error = _refused([{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}])
    assert error.message.startswith("'input_file' content is not supported") and "input_text" in error.message
    assert "audio" in _refused([{"role": "user", "content": [{"type": "input_audio"}]}]).message


@pytest.mark.parametrize("raw", [{"type": "item_reference", "id": "msg_1"}, {"id": "msg_1"}])
def test_item_references_are_refused_with_the_way_around_them(raw):
    error = _refused([raw])
    assert error.param == "input[0].type" and "previous_response_id" in error.message


def test_an_unknown_field_is_named_and_a_missing_required_one_too():
    assert _refused([{"role": "user", "content": "x", "colour": 1}]).param == "input[0].colour"
    error = _refused([{"type": "function_call", "name": "f", "arguments": "{}"}])
    assert error.param == "input[0].call_id" and error.message.startswith("Missing required parameter")
