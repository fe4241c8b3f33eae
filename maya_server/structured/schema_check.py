"""The JSON Schema subset Maya accepts for structured output and strict function tools.

Maya validates generated JSON before publishing it (and holds the engine to
the schema's grammar while it writes, `grammar.py`, where it can), so a schema
is only useful if every keyword in it is one the validator and the model prompt
can honour. Anything else — references,
definitions, patterns, formats, conditionals, allOf/oneOf/not, unknown
keywords — is a 400 before generation whose `param` walks into the schema,
e.g. `text.format.schema.properties.name.pattern`.

`$schema` may name Draft 2020-12, 2019-09, draft-07, draft-06 or draft-04 (`DIALECTS`);
whichever it names, the subset below is validated with Draft 2020-12 semantics.

Supported (Draft 2020-12 semantics): type (one name or a list, so
["string", "null"] is a nullable string), properties, required,
additionalProperties, items, enum, const, anyOf, minimum, maximum,
exclusiveMinimum, exclusiveMaximum, multipleOf, minLength, maxLength,
minItems, maxItems, and the annotations title, description, default,
examples and deprecated. The root must be an object schema. Limits: 64 KiB
serialized, 512 schema nodes, 24 nesting levels.

Every keyword's value is checked as well, so an accepted schema is a valid
Draft 2020-12 schema and the check needs no `jsonschema` import.
"""

from __future__ import annotations

from typing import Any, Callable

import orjson

from ..errors import InvalidRequestError

MAX_SCHEMA_BYTES = 64 * 1024
MAX_SCHEMA_NODES = 512
MAX_SCHEMA_DEPTH = 24

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
DIALECTS = frozenset({
    "json-schema.org/draft/2020-12/schema", "json-schema.org/draft/2019-09/schema",
    "json-schema.org/draft-07/schema", "json-schema.org/draft-06/schema", "json-schema.org/draft-04/schema",
})
"""`$schema` values accepted (http or https, with or without the empty fragment `#`): clients name the draft
their generator writes (zod, and so the Vercel AI SDK, writes draft-07). Within the subset the drafts agree,
except draft-04's boolean `exclusiveMinimum`/`exclusiveMaximum`, refused with a message saying so; the subset
is validated with Draft 2020-12 semantics whatever the dialect named."""
_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")

_REJECTED = {
    "$ref": "references are not supported; inline the referenced schema.",
    "$dynamicRef": "references are not supported; inline the referenced schema.",
    "$defs": "definitions are not supported; inline each definition where it is used.",
    "definitions": "definitions are not supported; inline each definition where it is used.",
    "pattern": "string patterns are not supported.",
    "patternProperties": "pattern properties are not supported.",
    "format": "string formats are not supported.",
    "if": "conditional schemas (if/then/else) are not supported.",
    "then": "conditional schemas (if/then/else) are not supported.",
    "else": "conditional schemas (if/then/else) are not supported.",
    "dependentSchemas": "conditional schemas are not supported.",
    "dependentRequired": "conditional schemas are not supported.",
    "allOf": "allOf is not supported; only anyOf can combine schemas.",
    "oneOf": "oneOf is not supported; use anyOf.",
    "not": "'not' is not supported.",
}


def check_schema(schema: Any, *, strict: bool, param: str) -> None:
    """400 at the offending keyword's path unless `schema` is inside the supported subset.

    `strict` adds OpenAI's strict rule: every object schema sets
    `additionalProperties: false` and lists all its properties in `required`.
    """
    if not isinstance(schema, dict):
        raise InvalidRequestError(f"Invalid type for '{param}': expected a JSON Schema object.", param=param)
    _check_size(schema, param)
    if schema.get("type") != "object":
        raise _invalid(f"{param}.type", "the root schema must be an object: set \"type\": \"object\".")
    _SchemaWalker(strict).visit(schema, param, depth=1, root=True)


def is_known_dialect(value: Any) -> bool:
    """Whether `$schema` names a dialect in `DIALECTS`."""
    if not isinstance(value, str):
        return False
    scheme, _, rest = value.partition("://")
    return scheme in ("http", "https") and rest.removesuffix("#") in DIALECTS


def _check_size(schema: dict, param: str) -> None:
    try:
        size = len(orjson.dumps(schema))
    except orjson.JSONEncodeError:
        raise _invalid(param, f"the schema is nested more than {MAX_SCHEMA_DEPTH} levels deep.") from None
    if size > MAX_SCHEMA_BYTES:
        raise _invalid(param, f"the schema is {size} bytes serialized; the limit is {MAX_SCHEMA_BYTES} bytes (64 KiB).")


def _invalid(param: str, message: str) -> InvalidRequestError:
    return InvalidRequestError(f"Invalid schema at '{param}': {message}", param=param)


class _SchemaWalker:
    """One pass over the schema tree, counting nodes and depth while checking each keyword."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.nodes = 0
        self._keywords: dict[str, Callable[[Any, str, int], None]] = {
            "type": self._type,
            "properties": self._properties,
            "required": self._required,
            "additionalProperties": self._additional,
            "items": self._items,
            "enum": self._enum,
            "const": _any_value,
            "anyOf": self._any_of,
            "minimum": _number,
            "maximum": _number,
            "exclusiveMinimum": _exclusive_bound,
            "exclusiveMaximum": _exclusive_bound,
            "multipleOf": _positive_number,
            "minLength": _count,
            "maxLength": _count,
            "minItems": _count,
            "maxItems": _count,
            "title": _string,
            "description": _string,
            "default": _any_value,
            "examples": _array,
            "deprecated": _boolean,
        }

    def visit(self, schema: Any, param: str, *, depth: int, root: bool = False) -> None:
        if not isinstance(schema, dict):
            raise _invalid(param, "expected a schema object.")
        self.nodes += 1
        if self.nodes > MAX_SCHEMA_NODES:
            raise _invalid(param, f"the schema has more than {MAX_SCHEMA_NODES} nodes.")
        if depth > MAX_SCHEMA_DEPTH:
            raise _invalid(param, f"the schema is nested more than {MAX_SCHEMA_DEPTH} levels deep.")
        for keyword, value in schema.items():
            self._keyword(keyword, value, f"{param}.{keyword}", depth, root)
        if self.strict and _is_object_schema(schema):
            _check_strict_object(schema, param)

    def _keyword(self, keyword: str, value: Any, param: str, depth: int, root: bool) -> None:
        if keyword == "$schema" and root:
            if not is_known_dialect(value):
                raise _invalid(param, "expected one of the JSON Schema dialects Draft 2020-12, 2019-09, draft-07, "
                                      f"draft-06 or draft-04 (e.g. {DRAFT_2020_12}); got {str(value)[:200]!r}.")
            return
        if keyword in _REJECTED:
            raise _invalid(param, _REJECTED[keyword])
        check = self._keywords.get(keyword)
        if check is None:
            raise _invalid(param, f"the keyword {keyword!r} is not supported.")
        check(value, param, depth)

    def _type(self, value: Any, param: str, depth: int) -> None:
        names = value if isinstance(value, list) else [value]
        if not names or len(set(map(repr, names))) != len(names):
            raise _invalid(param, "expected a type name or a non-empty list of distinct type names.")
        for i, name in enumerate(names):
            if name not in _TYPES:
                where = f"{param}[{i}]" if isinstance(value, list) else param
                raise _invalid(where, f"{name!r} is not a JSON Schema type; expected one of {', '.join(_TYPES)}.")

    def _properties(self, value: Any, param: str, depth: int) -> None:
        if not isinstance(value, dict):
            raise _invalid(param, "expected an object mapping property names to schemas.")
        for name, sub in value.items():
            self.visit(sub, f"{param}.{name}", depth=depth + 1)

    def _required(self, value: Any, param: str, depth: int) -> None:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _invalid(param, "expected an array of property names.")
        if len(set(value)) != len(value):
            raise _invalid(param, "property names must not repeat.")

    def _additional(self, value: Any, param: str, depth: int) -> None:
        if not isinstance(value, bool):
            self.visit(value, param, depth=depth + 1)

    def _items(self, value: Any, param: str, depth: int) -> None:
        if not isinstance(value, bool):
            self.visit(value, param, depth=depth + 1)

    def _enum(self, value: Any, param: str, depth: int) -> None:
        if not isinstance(value, list) or not value:
            raise _invalid(param, "expected a non-empty array of values.")

    def _any_of(self, value: Any, param: str, depth: int) -> None:
        if not isinstance(value, list) or not value:
            raise _invalid(param, "expected a non-empty array of schemas.")
        for i, sub in enumerate(value):
            self.visit(sub, f"{param}[{i}]", depth=depth + 1)


def _is_object_schema(schema: dict) -> bool:
    kind = schema.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in schema


def _check_strict_object(schema: dict, param: str) -> None:
    """OpenAI's strict rule: closed objects whose every property is required (use a nullable type for optional)."""
    if schema.get("additionalProperties") is not False:
        raise _invalid(f"{param}.additionalProperties", "strict schemas must set additionalProperties to false.")
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    missing = [name for name in properties if name not in required]
    if missing:
        raise _invalid(
            f"{param}.required",
            f"strict schemas must require every property; {missing[0]!r} is missing "
            "(give it a nullable type such as [\"string\", \"null\"] to make it optional).",
        )
    unknown = [name for name in required if name not in properties]
    if unknown:
        raise _invalid(f"{param}.required", f"{unknown[0]!r} is required but not defined in properties.")


def _any_value(value: Any, param: str, depth: int) -> None:
    """const/default: any JSON value is allowed."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(value: Any, param: str, depth: int) -> None:
    if not _is_number(value):
        raise _invalid(param, "expected a number.")


def _exclusive_bound(value: Any, param: str, depth: int) -> None:
    if isinstance(value, bool):
        raise _invalid(param, "expected a number: the bound itself, as Draft 2020-12 (and draft-06 onward) write it; "
                              "draft-04's boolean form is not supported.")
    _number(value, param, depth)


def _positive_number(value: Any, param: str, depth: int) -> None:
    if not _is_number(value) or value <= 0:
        raise _invalid(param, "expected a number greater than 0.")


def _count(value: Any, param: str, depth: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _invalid(param, "expected a non-negative integer.")


def _string(value: Any, param: str, depth: int) -> None:
    if not isinstance(value, str):
        raise _invalid(param, "expected a string.")


def _array(value: Any, param: str, depth: int) -> None:
    if not isinstance(value, list):
        raise _invalid(param, "expected an array.")


def _boolean(value: Any, param: str, depth: int) -> None:
    if not isinstance(value, bool):
        raise _invalid(param, "expected true or false.")
