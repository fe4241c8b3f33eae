"""A `strict` function tool's parameters, held to the strict schema subset at request time (both APIs).

Its arguments are then checked before they are published (`gate.py`), so the schema must be one the
validator can enforce: an unsupported keyword is a 400 naming it, before any generation.
"""

from __future__ import annotations

from ..errors import InvalidRequestError
from .schema_check import check_schema


def check_strict_parameters(parameters: dict | None, where: str) -> None:
    """A strict function's parameters: present, and inside the strict schema subset (both APIs)."""
    if parameters is None:
        raise InvalidRequestError(
            f"'{where}' is required when 'strict' is true; for a function without arguments send "
            '{"type": "object", "properties": {}, "additionalProperties": false}.',
            param=where,
        )
    check_schema(parameters, strict=True, param=where)
