"""The output formats both APIs accept (plain text, any JSON object, a JSON Schema) and what each asks of the model.

Responses sends a format flat in `text.format`; Chat Completions nests a schema format under
`response_format.json_schema`. Each API unwraps its own shape and hands the flat object to
`parse_format`, so both get the same `OutputFormat`, checked against the same schema subset
while the request is validated: an unsupported keyword is a 400 before any generation.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence, Union

from pydantic import Field, StrictBool, StrictStr

from ..errors import InvalidRequestError
from ..neutral.conversation import OutputSchema
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


def output_schema(fmt: OutputFormat) -> OutputSchema | None:
    """What the neutral conversation carries of a format (None for plain text): the families word it."""
    if isinstance(fmt, JsonSchemaFormat):
        return OutputSchema(fmt.json_schema, fmt.name, fmt.description)
    if isinstance(fmt, JsonObjectFormat):
        return OutputSchema()
    return None
