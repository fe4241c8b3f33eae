"""The supported JSON Schema subset: accept/reject table, strict rules, limits, SDK-generated schemas."""

from __future__ import annotations

from typing import Literal, Optional

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel

from maya_server.errors import InvalidRequestError
from maya_server.structured.schema_check import MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES, check_schema

from tests.responses.helpers import parse

P = "text.format.schema"


def obj(properties: dict, **extra) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False, **extra}


def error(schema, *, strict=False) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as caught:
        check_schema(schema, strict=strict, param=P)
    return caught.value


ACCEPTED = [
    ("empty object", {"type": "object"}),
    ("basic types", obj({"s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
                         "b": {"type": "boolean"}, "z": {"type": "null"}})),
    ("nullable type list", obj({"s": {"type": ["string", "null"]}})),
    ("nested object", obj({"o": obj({"x": {"type": "integer"}})})),
    ("array of objects", obj({"a": {"type": "array", "items": obj({"x": {"type": "string"}}),
                                    "minItems": 1, "maxItems": 3}})),
    ("enum and const", obj({"e": {"enum": ["a", "b", None]}, "c": {"const": 3}})),
    ("anyOf", obj({"v": {"anyOf": [{"type": "integer"}, obj({"x": {"type": "string"}})]}})),
    ("numeric bounds", obj({"n": {"type": "number", "minimum": 0, "maximum": 10.5, "exclusiveMinimum": -1,
                                  "exclusiveMaximum": 11, "multipleOf": 0.5}})),
    ("string length", obj({"s": {"type": "string", "minLength": 1, "maxLength": 5}})),
    ("annotations", obj({"s": {"type": "string", "title": "S", "description": "d", "default": "x",
                               "examples": ["y"], "deprecated": False}}, title="Root", description="r")),
    ("schema additionalProperties", {"type": "object", "additionalProperties": {"type": "integer"}}),
    ("boolean items", obj({"a": {"type": "array", "items": False}})),
    ("draft 2020-12 $schema", {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}),
    ("draft-07 $schema (zod)", {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}),
    ("untyped property", {"type": "object", "properties": {"anything": {}}}),
]


@pytest.mark.parametrize("schema", [pytest.param(s, id=n) for n, s in ACCEPTED])
def test_supported_schemas_are_accepted(schema):
    check_schema(schema, strict=False, param=P)
    Draft202012Validator.check_schema(schema)


REJECTED = [
    ("not an object", [], P),
    ("root array", {"type": "array"}, f"{P}.type"),
    ("root without type", {"properties": {}}, f"{P}.type"),
    ("root nullable", {"type": ["object", "null"]}, f"{P}.type"),
    ("$ref", obj({"a": {"$ref": "#/$defs/A"}}), f"{P}.properties.a.$ref"),
    ("$defs", {"type": "object", "$defs": {"A": {"type": "string"}}}, f"{P}.$defs"),
    ("definitions", {"type": "object", "definitions": {}}, f"{P}.definitions"),
    ("pattern", obj({"name": {"type": "string", "pattern": "^a"}}), f"{P}.properties.name.pattern"),
    ("patternProperties", {"type": "object", "patternProperties": {}}, f"{P}.patternProperties"),
    ("format", obj({"d": {"type": "string", "format": "date"}}), f"{P}.properties.d.format"),
    ("if", {"type": "object", "if": {}}, f"{P}.if"),
    ("then", {"type": "object", "then": {}}, f"{P}.then"),
    ("else", {"type": "object", "else": {}}, f"{P}.else"),
    ("allOf", obj({"a": {"allOf": [{"type": "string"}]}}), f"{P}.properties.a.allOf"),
    ("oneOf", obj({"a": {"oneOf": [{"type": "string"}]}}), f"{P}.properties.a.oneOf"),
    ("not", obj({"a": {"not": {"type": "string"}}}), f"{P}.properties.a.not"),
    ("unknown keyword", obj({"a": {"type": "string", "color": "red"}}), f"{P}.properties.a.color"),
    ("uniqueItems", obj({"a": {"type": "array", "uniqueItems": True}}), f"{P}.properties.a.uniqueItems"),
    ("prefixItems", obj({"a": {"type": "array", "prefixItems": []}}), f"{P}.properties.a.prefixItems"),
    ("other $schema", {"$schema": "http://json-schema.org/draft-03/schema#", "type": "object"}, f"{P}.$schema"),
    ("not a dialect", {"$schema": "https://example.com/my-schema", "type": "object"}, f"{P}.$schema"),
    ("ftp $schema", {"$schema": "ftp://json-schema.org/draft-07/schema#", "type": "object"}, f"{P}.$schema"),
    ("$schema without a scheme", {"$schema": "json-schema.org/draft-07/schema", "type": "object"}, f"{P}.$schema"),
    ("draft-03 $schema", {"$schema": "https://json-schema.org/draft-03/schema", "type": "object"}, f"{P}.$schema"),
    ("$schema not a string", {"$schema": 7, "type": "object"}, f"{P}.$schema"),
    ("draft-04 boolean bound", {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
                                "properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": True}}},
     f"{P}.properties.n.exclusiveMinimum"),
    ("nested $schema", obj({"a": {"$schema": "https://json-schema.org/draft/2020-12/schema"}}),
     f"{P}.properties.a.$schema"),
    ("unknown type", obj({"a": {"type": "str"}}), f"{P}.properties.a.type"),
    ("unknown type in list", obj({"a": {"type": ["string", "nil"]}}), f"{P}.properties.a.type[1]"),
    ("repeated type", obj({"a": {"type": ["string", "string"]}}), f"{P}.properties.a.type"),
    ("empty type list", obj({"a": {"type": []}}), f"{P}.properties.a.type"),
    ("properties not object", {"type": "object", "properties": []}, f"{P}.properties"),
    ("property schema not object", {"type": "object", "properties": {"a": "string"}}, f"{P}.properties.a"),
    ("required not list", {"type": "object", "required": "a"}, f"{P}.required"),
    ("required repeated", {"type": "object", "required": ["a", "a"]}, f"{P}.required"),
    ("enum empty", obj({"a": {"enum": []}}), f"{P}.properties.a.enum"),
    ("anyOf empty", obj({"a": {"anyOf": []}}), f"{P}.properties.a.anyOf"),
    ("anyOf member", obj({"a": {"anyOf": [{"type": "string"}, {"pattern": "x"}]}}),
     f"{P}.properties.a.anyOf[1].pattern"),
    ("items schema", obj({"a": {"type": "array", "items": {"format": "uri"}}}), f"{P}.properties.a.items.format"),
    ("minimum string", obj({"a": {"type": "number", "minimum": "0"}}), f"{P}.properties.a.minimum"),
    ("multipleOf zero", obj({"a": {"type": "number", "multipleOf": 0}}), f"{P}.properties.a.multipleOf"),
    ("maxLength negative", obj({"a": {"type": "string", "maxLength": -1}}), f"{P}.properties.a.maxLength"),
    ("minItems float", obj({"a": {"type": "array", "minItems": 1.5}}), f"{P}.properties.a.minItems"),
    ("maxItems bool", obj({"a": {"type": "array", "maxItems": True}}), f"{P}.properties.a.maxItems"),
    ("description type", obj({"a": {"type": "string", "description": 5}}), f"{P}.properties.a.description"),
    ("title type", {"type": "object", "title": ["x"]}, f"{P}.title"),
    ("additionalProperties invalid", {"type": "object", "additionalProperties": "no"}, f"{P}.additionalProperties"),
]


@pytest.mark.parametrize("schema, param", [pytest.param(s, p, id=n) for n, s, p in REJECTED])
def test_unsupported_schemas_are_rejected_at_the_keyword(schema, param):
    assert error(schema).param == param


STRICT_REJECTED = [
    ("root open", {"type": "object", "properties": {}}, f"{P}.additionalProperties"),
    ("root additionalProperties true", {"type": "object", "additionalProperties": True}, f"{P}.additionalProperties"),
    ("optional property", {**obj({"a": {"type": "string"}}), "required": []}, f"{P}.required"),
    ("required unknown", {**obj({"a": {"type": "string"}}), "required": ["a", "b"]}, f"{P}.required"),
    ("nested open", obj({"o": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}),
     f"{P}.properties.o.additionalProperties"),
    ("object in array", obj({"a": {"type": "array", "items": {"type": "object", "additionalProperties": False,
                                                              "properties": {"x": {"type": "string"}}}}}),
     f"{P}.properties.a.items.required"),
    ("nullable object", obj({"o": {"type": ["object", "null"], "properties": {}}}),
     f"{P}.properties.o.additionalProperties"),
]


@pytest.mark.parametrize("schema, param", [pytest.param(s, p, id=n) for n, s, p in STRICT_REJECTED])
def test_strict_objects_must_be_closed_and_fully_required(schema, param):
    assert error(schema, strict=True).param == param


def test_strict_accepts_nullable_for_optional_values():
    check_schema(obj({"a": {"type": ["string", "null"]}, "o": obj({"x": {"anyOf": [{"type": "integer"},
                                                                                   {"type": "null"}]}})}),
                 strict=True, param=P)


def test_strict_refuses_the_same_values_left_out_of_required():
    """The twin of the test above: nullable is how strict mode says optional; leaving a property out of
    `required` is not, at the root or nested."""
    nullable_a = {"type": ["string", "null"]}
    assert error({**obj({"a": nullable_a}), "required": []}, strict=True).param == f"{P}.required"
    nested = {**obj({"x": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}), "required": []}
    assert error(obj({"a": nullable_a, "o": nested}), strict=True).param == f"{P}.properties.o.required"


def test_size_limit():
    small = obj({"s": {"type": "string", "description": "x" * 60_000}})
    check_schema(small, strict=True, param=P)
    big = obj({"s": {"type": "string", "description": "x" * 70_000}})
    too_big = error(big)
    assert too_big.param == P and "65536 bytes" in too_big.message


def test_node_limit():
    within = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(MAX_SCHEMA_NODES - 1)}}
    check_schema(within, strict=False, param=P)
    over = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(MAX_SCHEMA_NODES)}}
    failure = error(over)
    assert failure.param == f"{P}.properties.p{MAX_SCHEMA_NODES - 1}" and "512 nodes" in failure.message


def nested(levels: int) -> dict:
    """An object schema `levels` schema levels deep (the root is level 1)."""
    schema: dict = {"type": "object"}
    for _ in range(levels - 1):
        schema = {"type": "object", "properties": {"n": schema}}
    return schema


def test_depth_limit():
    check_schema(nested(MAX_SCHEMA_DEPTH), strict=False, param=P)
    failure = error(nested(MAX_SCHEMA_DEPTH + 1))
    assert failure.param == P + ".properties.n" * MAX_SCHEMA_DEPTH and "24 levels" in failure.message


def test_absurd_depth_is_rejected_without_recursing():
    assert "nested" in error(nested(400)).message


def test_the_sdk_schema_of_a_flat_pydantic_model_is_accepted():
    from openai.lib._parsing._responses import type_to_text_format_param

    class Count(BaseModel):
        count: int
        label: str

    class Flat(BaseModel):
        name: str
        score: float
        tags: list[str]
        note: Optional[str]
        kind: Literal["a", "b"]
        ok: bool = True

    for model in (Count, Flat):
        fmt = type_to_text_format_param(model)
        request = parse(text={"format": fmt})
        assert request.output_format.json_schema == fmt["schema"]
        assert request.output_format.strict is True


def test_the_sdk_schema_of_a_nested_pydantic_model_is_rejected_explicitly():
    from openai.lib._parsing._responses import type_to_text_format_param

    class Inner(BaseModel):
        x: int

    class Outer(BaseModel):
        inner: Inner

    with pytest.raises(InvalidRequestError) as caught:
        parse(text={"format": type_to_text_format_param(Outer)})
    assert caught.value.param == "text.format.schema.$defs"
    assert "definitions are not supported" in caught.value.message


def test_sdk_pydantic_formats_with_unsupported_keywords_are_rejected():
    from datetime import date

    from openai.lib._parsing._responses import type_to_text_format_param

    class Dated(BaseModel):
        day: date

    with pytest.raises(InvalidRequestError) as caught:
        parse(text={"format": type_to_text_format_param(Dated)})
    assert caught.value.param == "text.format.schema.properties.day.format"


DIALECTS = ["json-schema.org/draft/2020-12/schema", "json-schema.org/draft/2019-09/schema",
            "json-schema.org/draft-07/schema", "json-schema.org/draft-06/schema", "json-schema.org/draft-04/schema"]


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("fragment", ["", "#"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_named_dialect_is_accepted_in_either_spelling(dialect, scheme, fragment):
    schema = obj({"n": {"type": "integer", "exclusiveMinimum": 0}})
    check_schema({"$schema": f"{scheme}://{dialect}{fragment}", **schema}, strict=True, param=P)


@pytest.mark.parametrize("spelling", ["ftp://{}", "file://{}", "{}", "https://{}#/definitions", "https://{}/",
                                      "https://evil.example/{}", "HTTPS://{}x"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_any_other_spelling_of_a_dialect_is_refused(dialect, spelling):
    """The twin of the test above: only http(s), the exact path and at most an empty fragment name a dialect."""
    schema = obj({"n": {"type": "integer", "exclusiveMinimum": 0}})
    refused = error({"$schema": spelling.format(dialect), **schema}, strict=True)
    assert refused.param == f"{P}.$schema" and "$schema" in refused.message


def test_a_draft_07_schema_is_validated_with_2020_12_semantics():
    from maya_server.structured.validator import StructuredValidator

    schema = {"$schema": "http://json-schema.org/draft-07/schema#",
              **obj({"n": {"type": "integer", "exclusiveMinimum": 0}, "tags": {"type": "array", "items": {"type": "string"}}})}
    validator = StructuredValidator(schema)
    assert validator.validate('{"n": 1, "tags": ["a"]}').ok
    assert not validator.validate('{"n": 0, "tags": ["a"]}').ok
    assert not validator.validate('{"n": 1, "tags": [1]}').ok
