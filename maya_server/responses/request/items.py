"""The `input` of a Responses request: messages, function calls and outputs, reasoning.

Items and content parts are dispatched by hand on their `type` (and, for
messages, their `role`) rather than through a pydantic union, because a union's
errors lose the exact path: a bad field must be reported as
`input[2].content[0].image_url`, never as "input[2] matched no member".
Every parsed item is a frozen model, so the same objects can later be stored
and replayed as the history of a `previous_response_id`.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence, Union

from pydantic import Field, StrictStr

from ...errors import InvalidRequestError
from ...util.validation import validate_model
from ...util.wire import Wire, bad_value, path, reject_unsupported, tag

Status = Literal["in_progress", "completed", "incomplete"]
Role = Literal["user", "assistant", "system", "developer"]

CALL_ID_CHARS = 64
"""The longest `call_id` a function call or its output may carry: OpenAI's own bound, so a client that works
against OpenAI fits, and Maya's generated ids (`call_` + 24 hex digits) fit. Without it one id could be any
size, and every error that names it would have to cope with that."""


class InputText(Wire):
    type: Literal["input_text"]
    text: StrictStr
    prompt_cache_breakpoint: dict[str, Any] | None = None


class InputImage(Wire):
    type: Literal["input_image"]
    image_url: StrictStr | None = None
    detail: Literal["low", "high", "auto", "original"] | None = None
    file_id: StrictStr | None = None
    prompt_cache_breakpoint: dict[str, Any] | None = None


class OutputText(Wire):
    """Assistant text replayed from an earlier response; annotations and logprobs are carried, not used."""

    type: Literal["output_text"]
    text: StrictStr
    annotations: list[dict[str, Any]] = []
    logprobs: list[dict[str, Any]] | None = None


class Refusal(Wire):
    type: Literal["refusal"]
    refusal: StrictStr


class ReasoningText(Wire):
    type: Literal["reasoning_text"]
    text: StrictStr


class SummaryText(Wire):
    type: Literal["summary_text"]
    text: StrictStr


MessagePart = Union[InputText, InputImage, OutputText, Refusal]
OutputPart = Union[InputText, InputImage]


class MessageItem(Wire):
    type: Literal["message"] = "message"
    role: Role
    content: Union[StrictStr, list[MessagePart]]
    id: StrictStr | None = None
    status: Status | None = None
    phase: Literal["commentary", "final_answer"] | None = None


class DirectCaller(Wire):
    type: Literal["direct"]


class FunctionCallItem(Wire):
    type: Literal["function_call"]
    call_id: StrictStr = Field(min_length=1, max_length=CALL_ID_CHARS)
    name: StrictStr = Field(min_length=1)
    arguments: StrictStr
    id: StrictStr | None = None
    status: Status | None = None
    namespace: StrictStr | None = None
    caller: DirectCaller | None = None


class FunctionCallOutputItem(Wire):
    type: Literal["function_call_output"]
    call_id: StrictStr = Field(min_length=1, max_length=CALL_ID_CHARS)
    output: Union[StrictStr, list[OutputPart]]
    id: StrictStr | None = None
    status: Status | None = None
    name: StrictStr | None = None
    namespace: StrictStr | None = None
    caller: DirectCaller | None = None


class ReasoningItem(Wire):
    """Plain model reasoning replayed as history; summaries and encrypted reasoning are not supported."""

    type: Literal["reasoning"]
    summary: list[SummaryText]
    content: list[ReasoningText] | None = None
    id: StrictStr | None = None
    encrypted_content: StrictStr | None = None
    status: Status | None = None


InputItem = Union[MessageItem, FunctionCallItem, FunctionCallOutputItem, ReasoningItem]

_ROLE_PARTS: dict[str, dict[str, type[Wire]]] = {
    "user": {"input_text": InputText, "input_image": InputImage},
    "system": {"input_text": InputText},
    "developer": {"input_text": InputText},
    "assistant": {"output_text": OutputText, "refusal": Refusal},
}
_OUTPUT_PARTS: dict[str, type[Wire]] = {"input_text": InputText, "input_image": InputImage}
_UNSUPPORTED_PARTS = {
    "input_file": "Maya does not read files; send the text as 'input_text'.",
    "input_audio": "Maya does not take audio input.",
}
_UNSUPPORTED_PART_FIELDS = {
    "prompt_cache_breakpoint": "Maya reuses cached prompt prefixes natively and takes no explicit breakpoints.",
}
_ECHOED = {
    "function_call": ("async", "async_", "parsed_arguments"),
    "output_text": ("parsed",),
}
"""Fields accepted and dropped, so the SDK's own objects replay as input: `async` (declared by the SDK's
`ResponseFunctionToolCallParam`, a past call's property, nothing to act on), `async_` (its name in the SDK
object's `model_dump()`), `parsed_arguments` and `parsed` (added by `responses.parse()`)."""


def parse_input(raw: Any, prefix: Sequence[Any] = ("input",)) -> tuple[InputItem, ...]:
    """A string becomes one user message; a list is parsed item by item."""
    if isinstance(raw, str):
        return (MessageItem(role="user", content=[InputText(type="input_text", text=raw)]),)
    if not isinstance(raw, list):
        where = path(prefix)
        raise InvalidRequestError(f"Invalid type for '{where}': expected a string or an array of items.", param=where)
    return tuple(parse_item(item, (*prefix, i)) for i, item in enumerate(raw))


def parse_item(raw: Any, prefix: Sequence[Any]) -> InputItem:
    """One input item, dispatched on `type` (a message may omit it and give only a `role`)."""
    if not isinstance(raw, dict):
        raise InvalidRequestError(f"Invalid type for '{path(prefix)}': expected an object.", param=path(prefix))
    kind = tag(raw, "type", prefix, "message" if "role" in raw else None)
    if kind == "message":
        return _parse_message(raw, prefix)
    if kind == "function_call":
        item = validate_model(FunctionCallItem, _without_echoes(raw, kind, prefix), prefix=prefix)
        reject_unsupported(item, prefix, {"namespace": "Maya serves no namespace tools."})
        return item
    if kind == "function_call_output":
        return _parse_function_output(raw, prefix)
    if kind == "reasoning":
        return _parse_reasoning(raw, prefix)
    raise _unsupported_item(raw, kind, prefix)


def _unsupported_item(raw: dict, kind: Any, prefix: Sequence[Any]) -> InvalidRequestError:
    if kind == "item_reference" or (kind is None and "id" in raw):
        return InvalidRequestError(
            "Item references are not supported: send the full item instead of its id, or continue a stored "
            "response with 'previous_response_id'. (The Vercel AI SDK sends references unless its OpenAI "
            "provider is given providerOptions: {openai: {store: false}}.)",
            param=path(prefix, "type"),
        )
    if kind is None:
        return InvalidRequestError(f"Missing required parameter: '{path(prefix, 'type')}'.", param=path(prefix, "type"))
    return bad_value(
        path(prefix, "type"),
        f"{kind!r}. Supported input item types are 'message', 'function_call', 'function_call_output' "
        "and 'reasoning'; hosted-tool, custom-tool, file and compaction items are not supported.",
    )


def _parse_message(raw: dict, prefix: Sequence[Any]) -> MessageItem:
    role = tag(raw, "role", prefix)
    if role not in _ROLE_PARTS:
        raise bad_value(
            path(prefix, "role"), f"{role!r}. Supported roles are 'user', 'assistant', 'system' and 'developer'."
        )
    if "type" in raw and raw["type"] is None:  # EasyInputMessageParam's optional type, dumped as null
        raw = {key: value for key, value in raw.items() if key != "type"}
    content = raw.get("content")
    if isinstance(content, list):
        parts = [_parse_part(p, _ROLE_PARTS[role], (*prefix, "content", j)) for j, p in enumerate(content)]
        raw = {**raw, "content": parts}
    return validate_model(MessageItem, raw, prefix=prefix)


def _parse_function_output(raw: dict, prefix: Sequence[Any]) -> FunctionCallOutputItem:
    output = raw.get("output")
    if isinstance(output, list):
        parts = [_parse_part(p, _OUTPUT_PARTS, (*prefix, "output", j)) for j, p in enumerate(output)]
        raw = {**raw, "output": parts}
    item = validate_model(FunctionCallOutputItem, raw, prefix=prefix)
    reject_unsupported(item, prefix, {"namespace": "Maya serves no namespace tools."})
    return item


def _parse_reasoning(raw: dict, prefix: Sequence[Any]) -> ReasoningItem:
    item = validate_model(ReasoningItem, raw, prefix=prefix)
    reject_unsupported(
        item, prefix, {"encrypted_content": "Maya cannot decrypt reasoning; replay it as 'content'."}
    )
    if item.summary:
        raise InvalidRequestError(
            f"'{path(prefix, 'summary')}' must be empty: reasoning summaries are not supported; "
            "replay the reasoning text as 'content'.",
            param=path(prefix, "summary"),
        )
    return item


def _parse_part(raw: Any, allowed: dict[str, type[Wire]], prefix: Sequence[Any]) -> Wire:
    """One content part of the kinds `allowed` here, with the checks Maya adds to OpenAI's types."""
    if not isinstance(raw, dict):
        raise InvalidRequestError(f"Invalid type for '{path(prefix)}': expected an object.", param=path(prefix))
    kind = tag(raw, "type", prefix)
    if kind not in allowed:
        raise _bad_part_type(kind, allowed, prefix)
    part = validate_model(allowed[kind], _without_echoes(raw, kind, prefix), prefix=prefix)
    if isinstance(part, (InputText, InputImage)):
        reject_unsupported(part, prefix, _UNSUPPORTED_PART_FIELDS)
    if isinstance(part, InputImage):
        _check_image(part, prefix)
    return part


def _without_echoes(raw: dict, kind: str, prefix: Sequence[Any]) -> dict:
    """`raw` without the SDK's echoed fields (`_ECHOED`); `async` must still be a boolean or null."""
    names = _ECHOED.get(kind, ())
    if not any(name in raw for name in names):
        return raw
    for name in ("async", "async_"):
        if raw.get(name) is not None and not isinstance(raw[name], bool):
            where = path(prefix, name)
            raise InvalidRequestError(f"Invalid type for '{where}': expected a boolean.", param=where)
    return {key: value for key, value in raw.items() if key not in names}


def _bad_part_type(kind: Any, allowed: dict[str, type[Wire]], prefix: Sequence[Any]) -> InvalidRequestError:
    where = path(prefix, "type")
    if kind is None:
        return InvalidRequestError(f"Missing required parameter: '{where}'.", param=where)
    if kind in _UNSUPPORTED_PARTS:
        return InvalidRequestError(f"'{kind}' content is not supported: {_UNSUPPORTED_PARTS[kind]}", param=where)
    names = " and ".join(repr(k) for k in allowed)
    return bad_value(where, f"{kind!r}. Supported values here are {names}.")


def _check_image(part: InputImage, prefix: Sequence[Any]) -> None:
    reject_unsupported(part, prefix, {"file_id": "Maya does not read files; send an image_url or a data URL."})
    if part.image_url is None:
        where = path(prefix, "image_url")
        raise InvalidRequestError(f"Missing required parameter: '{where}'.", param=where)
    if part.detail not in (None, "auto"):
        raise bad_value(path(prefix, "detail"), f"{part.detail!r}. Only the 'auto' image detail is supported.")
