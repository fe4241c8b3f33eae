"""Structured output for Chat Completions: `response_format` and `strict` tools.

Chat Completions nests a schema format under `json_schema` (`{"type": "json_schema",
"json_schema": {"name", "schema", "strict", "description"}}`), where Responses puts it
flat in `text.format`. Both become the same `OutputFormat`, checked against the same
schema subset and limits, and both APIs publish through the same validate-before-publish
gate (`structured/gate.py`): nothing generated reaches the client before the whole
result is known valid. A `strict` function's parameters are held to the strict subset here,
at request time, so an unsupported keyword is a 400 naming it, before any generation.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequestError
from ..structured.formats import OutputFormat, TextFormat, parse_format
from ..structured.strict import check_strict_parameters
from ..util.wire import bad_value
from .request import ChatRequest

_PARAM = "response_format"


def parse_response_format(raw: Any) -> OutputFormat:
    """`text` (the default), `json_object` or `json_schema`, as the shared output format."""
    if raw is None:
        return TextFormat()
    if not isinstance(raw, dict):
        raise InvalidRequestError(f"Invalid type for '{_PARAM}': expected an object.", param=_PARAM)
    kind = raw.get("type")
    if kind is None:
        raise InvalidRequestError(f"Missing required parameter: '{_PARAM}.type'.", param=f"{_PARAM}.type")
    if kind in ("text", "json_object"):
        return parse_format(raw, (_PARAM,))
    if kind != "json_schema":
        raise bad_value(f"{_PARAM}.type", f"{kind!r}. Supported values are 'text', 'json_object' and 'json_schema'.")
    unexpected = sorted(set(raw) - {"type", "json_schema"})
    if unexpected:
        raise InvalidRequestError(f"Unrecognized request argument supplied: '{_PARAM}.{unexpected[0]}'.",
                                  param=f"{_PARAM}.{unexpected[0]}")
    inner = raw.get("json_schema")
    if not isinstance(inner, dict):
        raise InvalidRequestError(f"Missing required parameter: '{_PARAM}.json_schema'.", param=f"{_PARAM}.json_schema")
    if "type" in inner:
        raise InvalidRequestError(f"Unrecognized request argument supplied: '{_PARAM}.json_schema.type'.",
                                  param=f"{_PARAM}.json_schema.type")
    return parse_format({**inner, "type": "json_schema"}, (_PARAM, "json_schema"))


def check_strict_tools(request: ChatRequest) -> None:
    """A `strict` function needs parameters within the strict schema subset."""
    for i, tool in enumerate(request.tools or ()):
        if tool.function.strict:
            check_strict_parameters(tool.function.parameters, f"tools[{i}].function.parameters")

