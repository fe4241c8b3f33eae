"""The bytes the response store keeps for one finished response, and the response they make again.

A response object is split three ways when it is stored:

    items      each input and output item as its own JSON object (`pack_item`): the store
               shares them between the responses of one conversation, so a long chain keeps
               each item once
    own        the few fields that differ from response to response (ENTRY_KEYS: id, status,
               times, error, usage, ...) as a JSON *array* of their values in ENTRY_KEYS' order
               (`pack_own`), so their names are not written again in every stored response
    envelope   every other field but `output` (model, instructions, tools, sampling settings,
               ...) as a JSON object (`pack_envelope`): the request-derived part, usually the
               same turn after turn, which the store keeps once per distinct value and owner

Usage has one shape (USAGE_LAYOUT) in every response Maya writes, so inside `own` it is the
array of its six numbers rather than an object of nested objects; a usage of any other shape
is kept as it was. What that saves, in bench/store_chain.py's 500-turn chain (user 300 +
answer 1200 characters a turn): stored bytes are 1.09x the bytes of the unique items; with
usage as an object 1.17x (153 bytes more a response), with `own` an object too 1.23x.
`unpack_response` puts the three parts back together: the result equals the packed response.

Every packed value is copied to its exact size (`dumps_kept`), since the store counts these
bytes against its limits and keeps them until the response expires.
"""

from __future__ import annotations

from typing import Iterable

import orjson

from ...util.kept_json import dumps_kept

ENTRY_KEYS = ("id", "created_at", "status", "completed_at", "error", "incomplete_details", "usage",
              "previous_response_id")
"""Fields of a response object kept in an entry's own JSON (an array of their values, in this
order); the rest but `output` is the envelope, shared by the owner's responses that agree on it."""

USAGE_LAYOUT = (("input_tokens",), ("input_tokens_details", "cached_tokens"),
                ("input_tokens_details", "cache_write_tokens"), ("output_tokens",),
                ("output_tokens_details", "reasoning_tokens"), ("total_tokens",))
"""A response's usage, always of this shape, is kept as the array of these values."""


def pack_item(item: dict) -> bytes:
    """One input or output item, as the store shares it between the responses that contain it."""
    return dumps_kept(item)


def pack_own(response: dict) -> bytes:
    """An entry's own JSON: ENTRY_KEYS' values as an array, usage as the array of its numbers."""
    values = [response.get(k) for k in ENTRY_KEYS]
    usage = response.get("usage")
    if usage is not None:
        packed = _usage_values(usage)
        if _usage_of(packed) == usage:
            values[ENTRY_KEYS.index("usage")] = packed
    return dumps_kept(values)


def pack_envelope(response: dict) -> bytes:
    """Everything of the response but its own fields and its output."""
    return dumps_kept({k: v for k, v in response.items() if k not in ENTRY_KEYS and k != "output"})


def unpack_item(data: bytes) -> dict:
    return orjson.loads(data)


def unpack_own(data: bytes) -> dict:
    fields = dict(zip(ENTRY_KEYS, orjson.loads(data)))
    if isinstance(fields["usage"], list):
        fields["usage"] = _usage_of(fields["usage"])
    return fields


def unpack_response(own: bytes, envelope: bytes, outputs: Iterable[bytes]) -> dict:
    """The response object that `pack_own`, `pack_envelope` and its packed output items came from."""
    return {**unpack_own(own), **orjson.loads(envelope), "output": [unpack_item(item) for item in outputs]}


def _usage_values(usage: dict) -> list:
    values = []
    for path in USAGE_LAYOUT:
        value = usage
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        values.append(value)
    return values


def _usage_of(values: list) -> dict:
    usage: dict = {}
    for (first, *rest), value in zip(USAGE_LAYOUT, values):
        if rest:
            usage.setdefault(first, {})[rest[0]] = value
        else:
            usage[first] = value
    return usage
