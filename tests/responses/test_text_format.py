"""`text` of a Responses request: its format is dispatched on `type` so an error keeps its exact path under
`text.format`, an absent or null format is plain text, and a verbosity other than `medium` is refused (Maya
does not steer the length of the output) while `medium` and absent pass."""

from __future__ import annotations

import pytest

from maya_server.errors import InvalidRequestError
from maya_server.responses.request.text_format import TextConfig, parse_text_config
from maya_server.structured.formats import JsonObjectFormat, JsonSchemaFormat, TextFormat

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": False}


def _refused(raw, prefix=("text",)) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as caught:
        parse_text_config(raw, prefix)
    assert caught.value.status == 400
    return caught.value


@pytest.mark.parametrize("raw", [{}, {"format": None}, {"format": {"type": "text"}}, {"verbosity": None}])
def test_an_absent_null_or_text_format_is_plain_text(raw):
    assert parse_text_config(raw) == TextConfig() and parse_text_config(raw).format == TextFormat()


def test_json_formats_parse_to_their_models():
    assert parse_text_config({"format": {"type": "json_object"}}).format == JsonObjectFormat(type="json_object")
    config = parse_text_config({"format": {"type": "json_schema", "name": "out", "schema": SCHEMA, "strict": True},
                                "verbosity": "medium"})
    assert isinstance(config.format, JsonSchemaFormat) and config.format.json_schema == SCHEMA
    assert config.verbosity == "medium"


@pytest.mark.parametrize("raw, param", [
    ("json", "text"),
    (None, "text"),
    ({"format": "json_object"}, "text.format"),
    ({"format": {}}, "text.format.type"),
    ({"format": {"type": "xml"}}, "text.format.type"),
    ({"format": {"type": "json_schema", "schema": SCHEMA}}, "text.format.name"),
    ({"format": {"type": "json_schema", "name": "bad name", "schema": SCHEMA}}, "text.format.name"),
    ({"verbosity": "loud"}, "text.verbosity"),
    ({"colour": "red"}, "text.colour"),
])
def test_a_bad_text_config_is_a_400_at_its_exact_path(raw, param):
    assert _refused(raw).param == param


@pytest.mark.parametrize("verbosity", ["low", "high"])
def test_verbosity_other_than_medium_is_refused_saying_why(verbosity):
    error = _refused({"verbosity": verbosity})
    assert error.param == "text.verbosity"
    assert error.message == (f"Invalid value for 'text.verbosity': {verbosity!r}. Only 'medium' is supported: "
                             "Maya does not steer the length of the output.")


def test_the_prefix_names_where_the_config_sits():
    assert _refused({"format": {"type": "xml"}}, ("body", "text")).param == "body.text.format.type"
