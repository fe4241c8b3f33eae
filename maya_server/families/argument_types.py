"""Reading a tool argument back into JSON by the tool's schema.

GLM writes argument values without quotes: a string as its raw text, anything
else as JSON (its template renders history as `v if v is string else
v|tojson`). So `42` may be a number or the string "42"; only the parameter's
JSON Schema can tell. A parameter typed only as string keeps the raw text;
otherwise the text is read as JSON when that yields an allowed type, and kept
as a string when it does not (the client's own validation, or our strict
checks, judge the value; the syntax was fine).
"""

from __future__ import annotations

from ..neutral.conversation import ToolSpec
from ..errors import TooDeep
from ..util.json_depth import MAX_JSON_DEPTH, loads_bounded, reject_constant

VALUE_DEPTH = MAX_JSON_DEPTH - 1
"""A value's own nesting limit: inside the arguments object, it makes the call at most MAX_JSON_DEPTH deep."""


def parameter_schema(tool: ToolSpec | None, key: str) -> dict | None:
    if tool is None or not isinstance(tool.parameters, dict):
        return None
    properties = tool.parameters.get("properties")
    schema = properties.get(key) if isinstance(properties, dict) else None
    return schema if isinstance(schema, dict) else None


def is_plain_string(schema: dict | None) -> bool:
    """Whether the value must be a string, so its raw text is the value."""
    return schema_types(schema) == {"string"}


def typed_value(raw: str, schema: dict | None) -> object:
    """The argument's value. JSON nested past what a call's arguments may hold raises `TooDeep` (the call is
    malformed, as for every family) rather than passing as a string."""
    if is_plain_string(schema):
        return raw
    try:
        value = loads_bounded(raw, VALUE_DEPTH, parse_constant=reject_constant)
    except TooDeep:
        raise
    except ValueError:
        return raw
    allowed = schema_types(schema)
    if allowed and not _json_types(value) & allowed:
        return raw
    return value


def schema_types(schema: dict | None) -> set[str]:
    """The JSON types a schema admits, as far as `type`, `enum`, `const`, `anyOf`/`oneOf` say."""
    if not isinstance(schema, dict):
        return set()
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    if "const" in schema:
        return _json_types(schema["const"])
    if isinstance(schema.get("enum"), list):
        return set().union(*(_json_types(v) for v in schema["enum"])) if schema["enum"] else set()
    members = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(members, list):
        return set().union(*(schema_types(m) for m in members)) if members else set()
    return set()


def _json_types(value: object) -> set[str]:
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int):
        return {"integer", "number"}
    if isinstance(value, float):
        return {"number"}
    if isinstance(value, str):
        return {"string"}
    if value is None:
        return {"null"}
    return {"array"} if isinstance(value, list) else {"object"}

