"""The grammar written for a schema accepts what the schema allows, as a model may space it, and turns away what
the grammar can say is wrong.

Checked with an independent GBNF recognizer (`gbnf_recognizer.py`); that llama-server itself reads every grammar
is `tests/structured/test_constrained_real.py`'s part. What a grammar cannot say (a `multipleOf`, a fractional
bound) it lets through: validation before publishing refuses it, as before.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from maya_server.structured.grammar import MAX_BOUNDED_REPEAT, Grammar, literal
from tests.structured.gbnf_recognizer import Recognizer


def _object(properties: dict, **extra) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False,
            **extra}


def recognizer(schema: dict | None) -> Recognizer:
    grammar = Grammar()
    return Recognizer(grammar.text(grammar.json_value(schema)))


def spellings(value) -> list[str]:
    """How a model may write `value`: compact, spaced, indented, with non-ASCII text raw or escaped."""
    return [json.dumps(value, separators=(",", ":")), json.dumps(value), json.dumps(value, indent=2),
            json.dumps(value, ensure_ascii=False, indent=1)]


CASES = [  # (schema, valid instances, invalid instances)
    (_object({"count": {"type": "integer"}}),
     [{"count": 3}, {"count": -12}, {"count": 0}],
     [{"count": 1.5}, {"count": "3"}, {}, {"count": 3, "more": 1}]),
    (_object({"city": {"type": "string"}, "country": {"type": "string"}}),
     [{"city": "Paris", "country": "France"}, {"city": "Zürich \"Z\"\n", "country": "\\"}],
     [{"city": "Paris"}, {"city": None, "country": "x"}]),
    (_object({"colors": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 4}}),
     [{"colors": ["red", "blue"]}, {"colors": ["a", "b", "c", "d"]}],
     [{"colors": ["red"]}, {"colors": ["a", "b", "c", "d", "e"]}, {"colors": [1, 2]}, {"colors": []}]),
    (_object({"ok": {"type": "boolean"}, "reason": {"type": "string", "maxLength": 5, "minLength": 1}}),
     [{"ok": True, "reason": "fine"}, {"ok": False, "reason": "x"}, {"ok": True, "reason": "\u00e9\u00e9\u00e9\u00e9\u00e9"}],
     [{"ok": "true", "reason": "x"}, {"ok": True, "reason": "too long"}, {"ok": True, "reason": ""}]),
    (_object({"sentiment": {"type": "string", "enum": ["positive", "negative"]},
              "score": {"type": "number", "minimum": 0, "maximum": 1}}),
     [{"sentiment": "positive", "score": 0.25}, {"sentiment": "negative", "score": 1}, {"sentiment": "negative", "score": 0}],
     [{"sentiment": "neutral", "score": 0.5}, {"sentiment": "positive", "score": 2}, {"sentiment": "positive", "score": -1}]),
    (_object({"name": {"type": "string"}, "age": {"type": ["integer", "null"]}}),
     [{"name": "Al", "age": None}, {"name": "Al", "age": 30}],
     [{"name": "Al", "age": "30"}, {"name": "Al"}]),
    (_object({"person": _object({"first": {"type": "string"}}), "tags": {"type": "array",
              "items": _object({"n": {"type": "integer", "minimum": 1, "maximum": 3}})}}),
     [{"person": {"first": "A"}, "tags": []}, {"person": {"first": "A"}, "tags": [{"n": 1}, {"n": 3}]}],
     [{"person": {}, "tags": []}, {"person": {"first": "A"}, "tags": [{"n": 4}]},
      {"person": {"first": "A"}, "tags": [{"n": 0}]}]),
    (_object({"due": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "unit": {"const": "kg"},
              "level": {"type": "integer", "enum": [1, 2, 3]}, "any": {}}),
     [{"due": None, "unit": "kg", "level": 2, "any": [1, {"a": None}]}, {"due": "x", "unit": "kg", "level": 1, "any": 0}],
     [{"due": 3, "unit": "kg", "level": 1, "any": 0}, {"due": None, "unit": "g", "level": 1, "any": 0},
      {"due": None, "unit": "kg", "level": 4, "any": 0}]),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}}},
     [{}, {"a": 1}, {"b": "x"}, {"a": 1, "c": True}, {"b": "x", "c": False}, {"a": 1, "b": "x", "c": True}],
     [{"a": "1"}, {"c": 1}]),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
     [{"a": 1}], [{}]),
    ({"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
     [{}, {"x": 1, "y": 2}], [{"x": -1}, {"x": "1"}]),
    (_object({"n": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 4}, "big": {"type": "integer", "minimum": 0}}),
     [{"n": 1, "big": 123456}, {"n": 3, "big": 0}],
     [{"n": 0, "big": 1}, {"n": 4, "big": 1}, {"n": 1, "big": -1}]),
    (_object({"weird \"key\"\\\n": {"type": "string"}, "/": {"type": "null"}}),
     [{"weird \"key\"\\\n": "v", "/": None}], [{"weird": "v", "/": None}]),
]


@pytest.mark.parametrize("schema,valid,invalid", CASES, ids=[str(i) for i in range(len(CASES))])
def test_the_grammar_accepts_the_schema_s_instances_however_spaced_and_refuses_what_it_can_say_is_wrong(
        schema, valid, invalid):
    accepts = recognizer(schema).accepts
    for instance in valid:
        jsonschema.validate(instance, schema)  # the cases themselves are right
        for text in spellings(instance):
            assert accepts(text), text
    for instance in invalid:
        assert not _valid(instance, schema)
        assert not accepts(json.dumps(instance)), instance


def _valid(instance, schema) -> bool:
    try:
        jsonschema.validate(instance, schema)
        return True
    except jsonschema.ValidationError:
        return False


def test_the_grammar_narrows_what_a_model_writes_to_one_order_and_whole_numbers_as_integers():
    """Valid for the schema, yet not what the grammar lets a model write: properties come in the schema's order,
    an integer is written without a fraction, a key as JSON writes it with non-ASCII text raw. Something valid
    is always left (the schema's own order)."""
    schema = _object({"city": {"type": "string"}, "count": {"type": "integer"}, "\u00e9t\u00e9": {"type": "null"}})
    accepts = recognizer(schema).accepts
    assert accepts('{"city": "Paris", "count": 1000, "\u00e9t\u00e9": null}')
    for text in ['{"count": 1000, "city": "Paris", "\u00e9t\u00e9": null}',
                 '{"city": "Paris", "count": 1000.0, "\u00e9t\u00e9": null}',
                 '{"city": "Paris", "count": 1000, "\\u00e9t\\u00e9": null}']:
        assert _valid(json.loads(text), schema) and not accepts(text)


def test_a_grammar_grows_with_the_schema_not_faster():
    """Optional properties (a non-strict schema) are any subset in order: written as one rule per property, so 400
    of them make a grammar of kilobytes, not of the megabytes all their combinations would."""
    names = [f"p{i}" for i in range(400)]
    grammar = Grammar()
    text = grammar.text(grammar.json_value({"type": "object", "properties": {n: {"type": "integer"} for n in names}}))
    assert len(text) < 40 * len(names) * 10
    accepts = Recognizer(text).accepts
    assert accepts("{}") and accepts('{"p3": 1, "p399": 2}') and accepts(json.dumps({n: 1 for n in names}))
    assert not accepts('{"p399": 2, "p3": 1}')


def test_json_object_is_any_object_and_only_an_object():
    grammar = Grammar()
    accepts = Recognizer(grammar.text(grammar.any_object())).accepts
    assert accepts('{}') and accepts('{"a": [1, {"b": null}], "c": "d"}') and accepts('{\n  "x": -1.5e3\n}')
    assert not accepts('[1]') and not accepts('"x"') and not accepts('{"a": }') and not accepts('{"a": 1,}')


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**15, 10**15) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(JSON)
def test_an_unconstrained_value_takes_any_json_a_model_may_write(value):
    accepts = recognizer({}).accepts
    for text in spellings(value)[:2] + [json.dumps(value, ensure_ascii=False)]:
        assert accepts(text), text


def test_whitespace_is_bounded_so_a_small_model_cannot_spend_its_limit_on_it():
    accepts = recognizer(_object({"a": {"type": "integer"}})).accepts
    assert accepts('{\n' + ' ' * 16 + '"a": 1}')
    assert not accepts('{\n' + ' ' * 17 + '"a": 1}')
    assert not accepts('{\n\n"a": 1}') and not accepts('{   "a": 1}')


def test_counts_past_the_bounded_limit_are_left_to_validation_not_expanded():
    grammar = Grammar()
    text = grammar.text(grammar.json_value(_object({"s": {"type": "string", "maxLength": MAX_BOUNDED_REPEAT + 1},
                                                    "a": {"type": "array", "minItems": 1000}})))
    assert "{0,257}" not in text and "1000" not in text and "999" not in text
    accepts = Recognizer(text).accepts
    assert accepts('{"s": "' + "x" * 300 + '", "a": []}')


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=12))
def test_reasoning_runs_to_the_first_closing_tag_and_no_further(text):
    grammar = Grammar()
    accepts = Recognizer(grammar.text(grammar.text_until("</think>"))).accepts
    if "</think>" not in text:
        assert accepts(text + "</think>")
        assert not accepts(text)
    assert not accepts(text + "</think>x</think>")


def test_literals_escape_what_gbnf_would_read_otherwise():
    for text in ['a"b', "back\\slash", "new\nline\ttab\r", "\x01", "\u00e9\u4e2d"]:
        assert Recognizer(f"root ::= {literal(text)}\n").accepts(text)
