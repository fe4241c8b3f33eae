"""Request-body parsing (`parse_json_object`) and model validation (`validate_model`): every refusal is
a 400 `invalid_request_error` whose `param` names the exact field, in OpenAI's dotted/indexed form."""

from __future__ import annotations

from typing import Literal, Union

import pytest
from pydantic import BaseModel, ConfigDict

from maya_server.errors import InvalidRequestError
from maya_server.util.validation import param_path, parse_json_object, validate_model


class Part(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["text"]
    text: str


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str
    content: Union[str, list[Part]] = ""
    parts: Union[list[Part], int] = 0
    notes: list[Part] | None = None
    n: int = 1


def refusal(call) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as caught:
        call()
    assert caught.value.status == 400 and caught.value.type == "invalid_request_error"
    return caught.value


@pytest.mark.parametrize("loc, expected", [
    (("messages", 2, "content", 0, "type"), "messages[2].content[0].type"),
    (("model",), "model"),
    ((0, "a"), "[0].a"),
    ((), None),
])
def test_param_path_writes_fields_dotted_and_indexes_bracketed(loc, expected):
    assert param_path(loc) == expected


def test_a_json_object_body_parses():
    assert parse_json_object(b'{"model": "m", "x": [1, {"y": "\xc3\xa9"}]}') == {"model": "m", "x": [1, {"y": "é"}]}


@pytest.mark.parametrize("body, words", [
    (b"{not json", "could not parse the JSON body"),
    (b"", "could not parse the JSON body"),
    (b"[1, 2]", "must be a JSON object"),
    (b'"text"', "must be a JSON object"),
])
def test_malformed_or_non_object_bodies_are_400s_without_a_param(body, words):
    error = refusal(lambda: parse_json_object(body))
    assert words in error.message and error.param is None


def test_a_body_deeper_than_the_limit_names_where():
    error = refusal(lambda: parse_json_object(b'{"a": {"b": [[1]]}}', max_depth=3))
    assert error.code == "json_too_deep" and error.param == "a.b[0]"
    assert "deeper than 3 levels" in error.message
    assert parse_json_object(b'{"a": {"b": [1]}}', max_depth=3)  # exactly at the limit is fine


def test_a_missing_field_is_named():
    error = refusal(lambda: validate_model(Body, {}))
    assert error.param == "model" and error.message == "Missing required parameter: 'model'."


def test_an_unknown_field_is_unrecognized_and_named_under_the_prefix():
    error = refusal(lambda: validate_model(Body, {"model": "m", "temprature": 1}, prefix=("input", 3)))
    assert error.param == "input[3].temprature"
    assert error.message == "Unrecognized request argument supplied: 'input[3].temprature'."


def test_a_wrong_value_names_its_field_and_not_pydantics_union_tags():
    error = refusal(lambda: validate_model(Body, {"model": "m", "content": [{"type": "text", "text": 5}]}))
    assert error.param == "content"  # pydantic's loc goes on through 'str' / 'list[Part]': those are not fields
    assert error.message.startswith("Invalid value for 'content': ")
    assert refusal(lambda: validate_model(Body, {"model": "m", "n": "many"})).param == "n"
    # the loc is ('parts', 'list[Part]', 0, 'text'): it stops at the tag, not skipping it to name a deeper field
    tagged = {"model": "m", "parts": [{"type": "text", "text": 5}]}
    assert refusal(lambda: validate_model(Body, tagged)).param == "parts"
    # an Optional is no tagged union: the path goes down to the field
    assert refusal(lambda: validate_model(Body, {"model": "m", "notes": [{"type": "text"}]})).param == "notes[0].text"


def test_a_valid_body_returns_the_model():
    body = validate_model(Body, {"model": "m", "content": [{"type": "text", "text": "hi"}]})
    assert body.model == "m" and body.content[0].text == "hi"
