"""`input` items and content parts: every rejection names its exact `param`; OpenAI's shapes parse."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from openai.types.responses import (
    ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText, ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Content as ReasoningContent

from maya_server.responses.request.items import (
    FunctionCallItem, FunctionCallOutputItem, InputImage, InputText, MessageItem, OutputText, ReasoningItem, Refusal,
)

from tests.responses.helpers import call, image, output, parse, reasoning, rejected, user

REJECTIONS = [
    ("item type", [5], "input[0]"),
    ("unknown role", [{"role": "robot", "content": "x"}], "input[0].role"),
    ("tool role", [{"role": "tool", "content": "x"}], "input[0].role"),
    ("missing type", [{}], "input[0].type"),
    ("item reference", [user(), {"type": "item_reference", "id": "msg_1"}], "input[1].type"),
    ("untyped item reference", [{"id": "msg_1"}], "input[0].type"),
    ("hosted item", [{"type": "web_search_call", "id": "ws_1", "status": "completed"}], "input[0].type"),
    ("custom tool item", [{"type": "custom_tool_call", "call_id": "c", "name": "n", "input": ""}], "input[0].type"),
    ("compaction item", [{"type": "compaction", "encrypted_content": "x"}], "input[0].type"),
    ("content type", [{"role": "user", "content": 5}], "input[0].content"),
    ("content missing", [{"role": "user"}], "input[0].content"),
    ("part type", [{"role": "user", "content": ["x"]}], "input[0].content[0]"),
    ("part missing type", [{"role": "user", "content": [{"text": "x"}]}], "input[0].content[0].type"),
    ("input_file", [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}], "input[0].content[0].type"),
    ("input_audio", [{"role": "user", "content": [{"type": "input_text", "text": "a"},
                                                   {"type": "input_audio", "input_audio": {}}]}],
     "input[0].content[1].type"),
    ("output_text from user", [{"role": "user", "content": [{"type": "output_text", "text": "x"}]}],
     "input[0].content[0].type"),
    ("input_text from assistant", [user(), {"role": "assistant", "content": [{"type": "input_text", "text": "x"}]}],
     "input[1].content[0].type"),
    ("image in system", [{"role": "system", "content": [image()]}], "input[0].content[0].type"),
    ("image in developer", [{"role": "developer", "content": [image()]}], "input[0].content[0].type"),
    ("text type", [{"role": "user", "content": [{"type": "input_text", "text": 5}]}], "input[0].content[0].text"),
    ("text extra", [{"role": "user", "content": [{"type": "input_text", "text": "x", "lang": "en"}]}],
     "input[0].content[0].lang"),
    ("cache breakpoint", [{"role": "user", "content": [{"type": "input_text", "text": "x",
                                                        "prompt_cache_breakpoint": {"mode": "explicit"}}]}],
     "input[0].content[0].prompt_cache_breakpoint"),
    ("image detail high", [{"role": "user", "content": [{"type": "input_text", "text": "x"},
                                                        image(detail="high")]}], "input[0].content[1].detail"),
    ("image detail low", [{"role": "user", "content": [image(detail="low")]}], "input[0].content[0].detail"),
    ("image detail unknown", [{"role": "user", "content": [image(detail="huge")]}], "input[0].content[0].detail"),
    ("image file_id", [{"role": "user", "content": [{"type": "input_image", "file_id": "file_1"}]}],
     "input[0].content[0].file_id"),
    ("image without url", [{"role": "user", "content": [{"type": "input_image", "detail": "auto"}]}],
     "input[0].content[0].image_url"),
    ("message status", [{"type": "message", "role": "user", "content": "x", "status": "done"}], "input[0].status"),
    ("message phase", [{"role": "assistant", "content": "x", "phase": "draft"}], "input[0].phase"),
    ("refusal type", [{"role": "assistant", "content": [{"type": "refusal", "refusal": 1}]}],
     "input[0].content[0].refusal"),
    ("call without call_id", [{"type": "function_call", "name": "f", "arguments": "{}"}], "input[0].call_id"),
    ("call empty call_id", [call("")], "input[0].call_id"),
    ("call without name", [{"type": "function_call", "call_id": "c", "arguments": "{}"}], "input[0].name"),
    ("call arguments object", [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}],
     "input[0].arguments"),
    ("call namespace", [{**call("c"), "namespace": "ns"}], "input[0].namespace"),
    ("call program caller", [{**call("c"), "caller": {"type": "program", "caller_id": "p"}}], "input[0].caller.type"),
    ("call status", [{**call("c"), "status": "done"}], "input[0].status"),
    ("output without call_id", [call("c"), {"type": "function_call_output", "output": "x"}], "input[1].call_id"),
    ("output type", [call("c"), output("c", 5)], "input[1].output"),
    ("output missing", [call("c"), {"type": "function_call_output", "call_id": "c"}], "input[1].output"),
    ("output file part", [call("c"), output("c", [{"type": "input_file", "file_id": "f"}])], "input[1].output[0].type"),
    ("output text part type", [call("c"), output("c", [{"type": "output_text", "text": "x"}])],
     "input[1].output[0].type"),
    ("output image detail", [call("c"), output("c", [image(detail="high")])], "input[1].output[0].detail"),
    ("output namespace", [call("c"), {**output("c"), "namespace": "ns"}], "input[1].namespace"),
    ("reasoning encrypted", [{**reasoning("r"), "encrypted_content": "gAAA"}], "input[0].encrypted_content"),
    ("reasoning summary", [{**reasoning("r"), "summary": [{"type": "summary_text", "text": "s"}]}], "input[0].summary"),
    ("reasoning summary missing", [{"type": "reasoning", "content": []}], "input[0].summary"),
    ("reasoning summary part", [{**reasoning("r"), "summary": [{"type": "reasoning_text", "text": "s"}]}],
     "input[0].summary[0].type"),
    ("reasoning content part", [{**reasoning("r"), "content": [{"type": "output_text", "text": "s"}]}],
     "input[0].content[0].type"),
    ("reasoning content text", [{**reasoning("r"), "content": [{"type": "reasoning_text", "text": None}]}],
     "input[0].content[0].text"),
]


@pytest.mark.parametrize("items, param", [pytest.param(i, p, id=n) for n, i, p in REJECTIONS])
def test_item_rejections_name_the_exact_param(items, param):
    assert rejected(input=items).param == param


def test_unsupported_item_and_part_messages():
    assert "references are not supported" in rejected(input=[{"type": "item_reference", "id": "x"}]).message
    files = rejected(input=[{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}])
    assert "not supported" in files.message
    assert "summar" in rejected(input=[{**reasoning("r"), "summary": [{"type": "summary_text", "text": "s"}]}]).message


def test_string_input_is_one_user_message():
    assert parse(input="hello").input == (
        MessageItem(role="user", content=[InputText(type="input_text", text="hello")]),
    )


def test_all_supported_item_shapes():
    items = [
        {"role": "system", "content": "sys"},
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
        {"role": "user", "content": [{"type": "input_text", "text": "look"},
                                     image("data:image/png;base64,iVBORw0KGgo=", detail="auto"), image()]},
        {"id": "rs_1", "type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "hmm"}],
         "encrypted_content": None, "status": "completed"},
        {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed", "phase": "final_answer",
         "content": [{"type": "output_text", "text": "a", "annotations": [], "logprobs": []},
                     {"type": "refusal", "refusal": "no"}]},
        {**call("c1"), "id": "fc_1", "status": "completed", "caller": {"type": "direct"}},
        {**output("c1", [{"type": "input_text", "text": "r"}, image()]), "id": "fco_1", "status": "completed",
         "name": "lookup"},
    ]
    parsed = parse(input=items).input
    assert [type(i) for i in parsed] == [
        MessageItem, MessageItem, MessageItem, ReasoningItem, MessageItem, FunctionCallItem, FunctionCallOutputItem,
    ]
    assert isinstance(parsed[2].content[1], InputImage) and parsed[2].content[1].image_url.startswith("data:")
    assert isinstance(parsed[4].content[0], OutputText) and isinstance(parsed[4].content[1], Refusal)
    assert isinstance(parsed[6].output[1], InputImage)


def test_sdk_output_items_replay_as_input():
    """`history += [item.to_dict() for item in response.output]` from the spec's own example parses."""
    sdk_items = [
        ResponseReasoningItem(id="rs_1", type="reasoning", summary=[],
                              content=[ReasoningContent(type="reasoning_text", text="think")]),
        ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed",
                              content=[ResponseOutputText(type="output_text", text="Hi", annotations=[])]),
        ResponseFunctionToolCall(type="function_call", call_id="call_1", name="lookup", arguments="{}",
                                 id="fc_1", status="completed"),
    ]
    history = [user(), *(item.to_dict() for item in sdk_items), output("call_1")]
    assert len(parse(input=history).input) == 5


def test_items_are_frozen():
    item = parse(input=[user()]).input[0]
    with pytest.raises(ValidationError):
        item.role = "assistant"  # type: ignore[misc]
