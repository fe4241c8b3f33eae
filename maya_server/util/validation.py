"""Request-body parsing with OpenAI-shaped errors whose `param` names the exact field."""

from __future__ import annotations

import re
from typing import Any, Sequence, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from ..errors import InvalidRequestError
from .json_depth import MAX_JSON_DEPTH, too_deep

Model = TypeVar("Model", bound=BaseModel)

_FIELD_NAME = re.compile(r"[a-z_][a-z0-9_]*")
_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none", "any"}


def param_path(loc: Sequence[Any]) -> str | None:
    """('messages', 2, 'content', 0, 'type') → 'messages[2].content[0].type'."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or None


def parse_json_object(body: bytes, max_depth: int = MAX_JSON_DEPTH) -> dict:
    """The body as a JSON object no deeper than `max_depth` (deeper: a 400 naming where)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise InvalidRequestError("We could not parse the JSON body of your request. Send valid JSON.") from None
    if not isinstance(data, dict):
        raise InvalidRequestError("The request body must be a JSON object.")
    where = too_deep(data, max_depth)
    if where is not None:
        raise InvalidRequestError(
            f"The request body nests JSON deeper than {max_depth} levels; shallow this value.",
            param=param_path(where), code="json_too_deep",
        )
    return data


def validate_model(model: type[Model], data: Any, *, prefix: Sequence[Any] = ()) -> Model:
    """Validate with pydantic; the first error becomes a 400 naming its field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(prefix) + _field_loc(first["loc"])
        raise InvalidRequestError(_message(first, loc), param=param_path(loc)) from None


def _field_loc(loc: Sequence[Any]) -> tuple:
    """Drop pydantic's union-member tags ('str', 'list[...]', 'TextContentPart'): they are not fields."""
    kept = []
    for part in loc:
        if isinstance(part, str) and (part in _TYPE_TAGS or not _FIELD_NAME.fullmatch(part)):
            break
        kept.append(part)
    return tuple(kept)


def _message(error: dict, loc: Sequence[Any]) -> str:
    where = param_path(loc) or "body"
    if error["type"] == "missing":
        return f"Missing required parameter: '{where}'."
    if error["type"] == "extra_forbidden":
        return f"Unrecognized request argument supplied: '{where}'."
    return f"Invalid value for '{where}': {error['msg']}."
