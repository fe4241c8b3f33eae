"""The output formats both APIs accept (plain text, any JSON object, a JSON Schema) and what each asks of the model.

Responses sends a format flat in `text.format`; Chat Completions nests a schema format under
`response_format.json_schema`. Each API unwraps its own shape and hands the flat object to
`parse_format`, so both get the same `OutputFormat`, checked against the same schema subset
while the request is validated: an unsupported keyword is a 400 before any generation.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence, Union

import orjson
from pydantic import Field, StrictBool, StrictStr

from ..errors import InvalidRequestError
from ..util.validation import validate_model
from ..util.wire import Wire, bad_value, path, tag
from .schema_check import check_schema


class TextFormat(Wire):
    type: Literal["text"] = "text"


class JsonObjectFormat(Wire):
    type: Literal["json_object"]


class JsonSchemaFormat(Wire):
    """`json_schema` is the wire field `schema` (a BaseModel attribute name); dump with by_alias=True."""

    type: Literal["json_schema"]
    name: StrictStr = Field(pattern=r"^[A-Za-z0-9_\-]{1,64}$")
    json_schema: dict[str, Any] = Field(alias="schema")
    description: StrictStr | None = None
    strict: StrictBool | None = None


OutputFormat = Union[TextFormat, JsonObjectFormat, JsonSchemaFormat]
_FORMATS: dict[str, type[Wire]] = {"text": TextFormat, "json_object": JsonObjectFormat, "json_schema": JsonSchemaFormat}


def parse_format(raw: Any, prefix: Sequence[Any]) -> OutputFormat:
    if not isinstance(raw, dict):
        raise InvalidRequestError(f"Invalid type for '{path(prefix)}': expected an object.", param=path(prefix))
    kind = tag(raw, "type", prefix)
    model = _FORMATS.get(kind)
    if kind is None:
        raise InvalidRequestError(f"Missing required parameter: '{path(prefix, 'type')}'.", param=path(prefix, "type"))
    if model is None:
        raise bad_value(
            path(prefix, "type"), f"{kind!r}. Supported values are 'text', 'json_object' and 'json_schema'."
        )
    fmt = validate_model(model, raw, prefix=prefix)
    if isinstance(fmt, JsonSchemaFormat):
        check_schema(fmt.json_schema, strict=bool(fmt.strict), param=path(prefix, "schema"))
    return fmt


def json_instructions(fmt: OutputFormat) -> str:
    """The system-prompt text that asks for JSON output; empty for plain text."""
    if isinstance(fmt, JsonObjectFormat):
        return "Respond with only a valid JSON object: no other text and no Markdown code fences."
    if not isinstance(fmt, JsonSchemaFormat):
        return ""
    lines = [
        "Respond with only a JSON object that matches the JSON Schema below: "
        "no other text and no Markdown code fences.",
        f"Schema name: {fmt.name}",
    ]
    if fmt.description:
        lines.append(f"Description: {fmt.description}")
    lines.append(orjson.dumps(fmt.json_schema).decode())
    return "\n".join(lines)
