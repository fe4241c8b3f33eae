"""The base shape every Responses request model shares, and the one way to refuse a field.

OpenAI's request has many parameters Maya cannot honour (hosted tools, files,
summaries, service tiers). They are declared on the models, so a client that
sends them gets "not supported" naming the exact field, rather than a vague
"unrecognized argument", and nothing is ever silently ignored.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from ..errors import InvalidRequestError
from .validation import param_path


class Wire(BaseModel):
    """Unknown fields are rejected (a typo never passes) and parsed values cannot be reassigned."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def path(prefix: Sequence[Any], *rest: Any) -> str:
    """('input', 2) + ('content', 0) → 'input[2].content[0]'."""
    return param_path((*prefix, *rest)) or ""


def reject_unsupported(model: BaseModel, prefix: Sequence[Any], reasons: Mapping[str, str]) -> None:
    """400 at the first field in `reasons` the client set to a non-null value.

    `reasons` maps a field name to the sentence explaining why it is unsupported.
    """
    for name, reason in reasons.items():
        if getattr(model, name) is not None:
            raise InvalidRequestError(f"'{path(prefix, name)}' is not supported: {reason}", param=path(prefix, name))


def tag(raw: dict, key: str, prefix: Sequence[Any], default: Any = None) -> Any:
    """A dispatching field (`type`, `role`): a string, or absent; anything else is a 400 here, before
    it is looked up in a table (an object or array is not even hashable)."""
    value = raw.get(key)
    value = default if value is None else value  # an SDK's model_dump() writes an unset field as null
    if value is not None and not isinstance(value, str):
        where = path(prefix, key)
        raise InvalidRequestError(f"Invalid type for '{where}': expected a string.", param=where)
    return value


def bad_value(param: str, message: str) -> InvalidRequestError:
    """The error for a value that has the right type but is not allowed here."""
    return InvalidRequestError(f"Invalid value for '{param}': {message}", param=param)
