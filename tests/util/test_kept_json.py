"""`dumps_kept`: the same JSON bytes as orjson, held in an object no larger than the JSON itself.

orjson hands back its worst-case-sized buffer; a store that keeps many responses must not hold
that slack, so the memory still allocated after the call is measured with tracemalloc.
"""

from __future__ import annotations

import tracemalloc

import orjson

from maya_server.util.kept_json import dumps_kept

RECORDS = [{"id": i, "text": "hello", "tags": ["a", "é"]} for i in range(4000)]


def held_after(dump) -> tuple[int, int]:
    """(length of the result, bytes still allocated while it is kept)."""
    tracemalloc.start()
    try:
        result = dump(RECORDS)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return len(result), held


def test_the_bytes_are_exactly_orjsons():
    for value in (RECORDS, {"a": None, "b": [1.5, True]}, "ünïcode ✓", [], {}):
        kept = dumps_kept(value)
        assert type(kept) is bytes
        assert kept == orjson.dumps(value)
        assert orjson.loads(kept) == value


def test_the_kept_object_is_exactly_as_large_as_its_json():
    size, held = held_after(dumps_kept)
    assert held < size + 1024  # the bytes object's header, nothing like orjson's slack


def test_plain_orjson_would_hold_its_worst_case_buffer():
    """The reason the helper exists; if orjson ever stops over-allocating, this says the copy is moot."""
    size, held = held_after(orjson.dumps)
    assert held > 2 * size
