"""The official SDK's request types define what may arrive: no field they declare is "unrecognized".

openai-python's `CompletionCreateParams`, `ChatCompletion*MessageParam`,
`ResponseCreateParams` and the input item params Maya serves are walked field by field:
each declared field, sent as `null` and as a plausible value synthesized from its type,
is either accepted or refused with a 400 that names it as *not supported*, never as an
unrecognized argument. Fields outside the types stay unrecognized 400s.
"""

from __future__ import annotations

import typing

import pytest
from openai.types.chat import ChatCompletionMessageParam, completion_create_params
from openai.types.responses import (
    EasyInputMessageParam, ResponseFunctionToolCallParam, ResponseOutputMessageParam, ResponseReasoningItemParam,
    response_create_params,
)
from openai.types.responses.response_input_item_param import FunctionCallOutput, Message

from maya_server.chat.request import parse_chat_request
from maya_server.errors import InvalidRequestError
from maya_server.responses.request.request import parse_responses_request

UNRECOGNIZED = "Unrecognized request argument"
USER = {"role": "user", "content": "hi"}
CALL = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "c", "output": "x"}
TOOL_CALL = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def hints(typed_dict) -> dict[str, object]:
    return typing.get_type_hints(typed_dict, include_extras=True)


def sample(annotation, depth: int = 0) -> object:
    """A plausible value of a TypedDict field's type: the first Literal, the first non-null member of a
    union, a TypedDict with its required keys."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Annotated, typing.Required, typing.NotRequired):
        return sample(args[0], depth)
    if origin is typing.Literal:
        return args[0]
    if origin is typing.Union:
        return sample(next(a for a in args if a is not type(None)), depth)
    if origin in (list, typing.List) or (origin is not None and getattr(origin, "__name__", "") in
                                          ("Iterable", "Sequence", "SequenceNotStr")):
        return [] if depth > 3 else [sample(args[0], depth + 1)]
    if origin in (dict, typing.Dict):
        return {}
    if typing.is_typeddict(annotation):
        fields = hints(annotation)
        required = getattr(annotation, "__required_keys__", frozenset(fields))
        return {k: sample(t, depth + 1) for k, t in fields.items() if k in required}
    return {str: "x", int: 0, float: 0.0, bool: False}.get(annotation, "x")


def outcome(parse, body: dict) -> str:
    try:
        parse(body)
    except InvalidRequestError as error:
        return error.message
    return "ok"


def chat_body(message: dict | None = None, **fields) -> dict:
    messages = [USER] if message is None else [USER, {"role": "assistant", "tool_calls": [TOOL_CALL]}, message] \
        if message.get("role") == "tool" else [USER, message]
    return {"model": "m", "messages": messages, **fields}


CHAT_FIELDS = [k for k in hints(completion_create_params.CompletionCreateParamsBase) if k not in ("messages", "model")]
MESSAGE_MINIMAL = {"system": {"role": "system", "content": "s"}, "developer": {"role": "developer", "content": "s"},
                   "user": USER, "assistant": {"role": "assistant", "content": "a"},
                   "tool": {"role": "tool", "content": "t", "tool_call_id": "c"}}
MESSAGE_FIELDS = [(member.__name__, sample(hints(member)["role"]), name, annotation)
                  for member in typing.get_args(ChatCompletionMessageParam)
                  for name, annotation in hints(member).items()
                  if sample(hints(member)["role"]) in MESSAGE_MINIMAL and name != "role"]


@pytest.mark.parametrize("name", CHAT_FIELDS)
def test_every_chat_parameter_is_recognized(name):
    annotation = hints(completion_create_params.CompletionCreateParamsBase)[name]
    assert outcome(parse_chat_request, chat_body(**{name: None})) == "ok"
    assert UNRECOGNIZED not in outcome(parse_chat_request, chat_body(**{name: sample(annotation)}))


@pytest.mark.parametrize(("member", "role", "name", "annotation"), MESSAGE_FIELDS,
                         ids=[f"{m}.{n}" for m, _, n, _ in MESSAGE_FIELDS])
def test_every_message_field_is_recognized(member, role, name, annotation):
    message = {**MESSAGE_MINIMAL[role], name: sample(annotation)}
    assert UNRECOGNIZED not in outcome(parse_chat_request, chat_body(message))
    nullable = type(None) in typing.get_args(typing.get_args(annotation)[0] if typing.get_origin(annotation) in (
        typing.Required, typing.NotRequired) else annotation)
    if nullable:
        assert outcome(parse_chat_request, chat_body({**MESSAGE_MINIMAL[role], name: None})) == "ok"


RESPONSES_FIELDS = [k for k in hints(response_create_params.ResponseCreateParamsBase) if k != "input"]


@pytest.mark.parametrize("name", RESPONSES_FIELDS)
def test_every_responses_parameter_is_recognized(name):
    annotation = hints(response_create_params.ResponseCreateParamsBase)[name]
    assert outcome(parse_responses_request, {"input": "hi", name: None}) == "ok"
    assert UNRECOGNIZED not in outcome(parse_responses_request, {"input": "hi", name: sample(annotation)})


ITEMS = {
    EasyInputMessageParam: (USER, [], []),
    Message: ({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}, [], []),
    ResponseOutputMessageParam: ({"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
                                  "content": [{"type": "output_text", "text": "a", "annotations": []}]}, [], [USER]),
    ResponseFunctionToolCallParam: (CALL, [USER], [OUTPUT]),
    FunctionCallOutput: (OUTPUT, [USER, CALL], []),
    ResponseReasoningItemParam: ({"type": "reasoning", "id": "rs_1", "summary": []}, [USER], []),
}
ITEM_FIELDS = [(item, name) for item in ITEMS for name in hints(item)]


@pytest.mark.parametrize(("item", "name"), ITEM_FIELDS, ids=[f"{i.__name__}.{n}" for i, n in ITEM_FIELDS])
def test_every_input_item_field_is_recognized(item, name):
    minimal, before, after = ITEMS[item]
    for value in (None, sample(hints(item)[name])):
        body = {"input": [*before, {**minimal, name: value}, *after]}
        assert UNRECOGNIZED not in outcome(parse_responses_request, body), (name, value)


def test_fields_outside_the_sdk_types_stay_unrecognized():
    assert UNRECOGNIZED in outcome(parse_chat_request, chat_body(colour="red"))
    assert UNRECOGNIZED in outcome(parse_chat_request, chat_body({"role": "assistant", "content": "a", "mood": 1}))
    assert UNRECOGNIZED in outcome(parse_responses_request, {"input": [USER, {**CALL, "mood": 1}, OUTPUT]})


def test_what_cannot_be_honoured_is_refused_by_name_not_ignored():
    refused = {
        "audio": {"voice": "alloy", "format": "mp3"}, "functions": [{"name": "f"}], "logit_bias": {"50256": -100},
        "modalities": ["text", "audio"], "top_logprobs": 2, "service_tier": "flex", "verbosity": "low",
        "web_search_options": {}, "prediction": {"type": "content", "content": "x"},
    }
    for name, value in refused.items():
        message = outcome(parse_chat_request, chat_body(**{name: value}))
        assert message != "ok" and name in message and UNRECOGNIZED not in message, name
    assert "not supported" in outcome(parse_chat_request, chat_body({"role": "assistant", "audio": {"id": "a1"}}))
    audio_part = {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}
    assert "not supported" in outcome(parse_chat_request, chat_body(audio_part))
