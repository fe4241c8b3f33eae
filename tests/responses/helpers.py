"""Shared builders for the Responses unit tests."""

from __future__ import annotations

from typing import Any

import pytest

from maya_server.errors import InvalidRequestError
from maya_server.responses.request.request import ResponsesRequest, parse_responses_request


def parse(**fields: Any) -> ResponsesRequest:
    body = {"model": "m", **fields}
    if "input" not in body and "previous_response_id" not in body:
        body["input"] = "hi"
    return parse_responses_request({k: v for k, v in body.items() if v is not ...})


def rejected(**fields: Any) -> InvalidRequestError:
    """The 400 for a request with `fields` (`input` defaults to "hi"; pass `input=...` to omit it)."""
    with pytest.raises(InvalidRequestError) as caught:
        parse(**fields)
    assert caught.value.status == 400
    return caught.value


def user(text: str = "hi") -> dict:
    return {"role": "user", "content": text}


def call(call_id: str, name: str = "lookup", arguments: str = '{"q": "x"}') -> dict:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def output(call_id: str, value: Any = "ok") -> dict:
    return {"type": "function_call_output", "call_id": call_id, "output": value}


def reasoning(text: str) -> dict:
    return {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": text}]}


def assistant(text: str) -> dict:
    part = {"type": "output_text", "text": text, "annotations": []}
    return {"type": "message", "role": "assistant", "content": [part]}


def image(url: str = "https://example.com/cat.png", **extra: Any) -> dict:
    return {"type": "input_image", "image_url": url, **extra}


TOOL = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}
STRICT_PARAMS = {
    "type": "object",
    "properties": {"q": {"type": "string"}},
    "required": ["q"],
    "additionalProperties": False,
}
