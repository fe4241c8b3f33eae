"""`check_strict_parameters`: a strict function tool must bring parameters, and they must sit inside the
strict schema subset (additionalProperties false, every property required), refused at request time
with the param pointing at the offending keyword, for either API's `where`."""

from __future__ import annotations

import pytest

from maya_server.errors import InvalidRequestError
from maya_server.structured.strict import check_strict_parameters

STRICT_OK = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
             "additionalProperties": False}


def refused(parameters, where="tools[0].parameters") -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as caught:
        check_strict_parameters(parameters, where)
    assert caught.value.status == 400
    return caught.value


def test_strict_parameters_in_the_subset_pass():
    check_strict_parameters(STRICT_OK, "tools[0].parameters")
    check_strict_parameters({"type": "object", "properties": {}, "additionalProperties": False}, "x")


def test_missing_parameters_are_a_400_that_says_what_to_send():
    error = refused(None, "tools[2].function.parameters")
    assert error.param == "tools[2].function.parameters"
    assert "required when 'strict' is true" in error.message
    assert '{"type": "object", "properties": {}, "additionalProperties": false}' in error.message


@pytest.mark.parametrize("parameters, param", [
    ({**STRICT_OK, "additionalProperties": True}, "tools[0].parameters.additionalProperties"),
    ({**STRICT_OK, "required": []}, "tools[0].parameters.required"),
    ({**STRICT_OK, "properties": {"city": {"type": "string", "format": "email"}}},
     "tools[0].parameters.properties.city.format"),
    ({"type": "array"}, "tools[0].parameters.type"),
    ({"type": "object", "properties": {}}, "tools[0].parameters.additionalProperties"),  # twins of the passes
    ({**STRICT_OK, "required": ["city", "country"]}, "tools[0].parameters.required"),
    ({**STRICT_OK, "properties": {"city": {"type": "string"}, "country": {"type": "string"}}},
     "tools[0].parameters.required"),
])
def test_parameters_outside_the_strict_subset_name_the_keyword(parameters, param):
    assert refused(parameters).param == param


def test_a_non_object_schema_is_an_invalid_type():
    error = refused(["not", "a", "schema"])
    assert error.param == "tools[0].parameters" and "expected a JSON Schema object" in error.message
