"""`text` of a Responses request: the output format (text, JSON object, JSON Schema) and verbosity.

A `json_schema` format's schema is checked against the supported subset here,
while the request is validated, so an unsupported keyword is a 400 before any
generation rather than a failure after it.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence, Union

from pydantic import Field, StrictBool, StrictStr

from ..errors import InvalidRequestError
from ..util.validation import validate_model
from ..structured.schema_check import check_schema
from .wire import Wire, bad_value, path, tag


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


class TextConfig(Wire):
    format: OutputFormat = TextFormat()
    verbosity: Literal["low", "medium", "high"] | None = None


def parse_text_config(raw: Any, prefix: Sequence[Any] = ("text",)) -> TextConfig:
    """The `text` object; its `format` is dispatched on `type` so errors keep their exact path."""
    if not isinstance(raw, dict):
        raise InvalidRequestError(f"Invalid type for '{path(prefix)}': expected an object.", param=path(prefix))
    if "format" in raw and raw["format"] is not None:
        raw = {**raw, "format": parse_format(raw["format"], (*prefix, "format"))}
    else:
        raw = {k: v for k, v in raw.items() if k != "format"}
    config = validate_model(TextConfig, raw, prefix=prefix)
    if config.verbosity not in (None, "medium"):
        raise bad_value(
            path(prefix, "verbosity"),
            f"{config.verbosity!r}. Only 'medium' is supported: Maya does not steer the length of the output.",
        )
    return config


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
