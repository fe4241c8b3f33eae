"""The response store frees what it evicts, and honours ASSEMBLY_BYTES at save time and on GET."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from maya_server.errors import StorageCapacityError
from maya_server.responses.settings import ResponsesSettings
from maya_server.responses.store.core import ResponseStore

from tests.responses.store.test_core import answer, item, response

OWNER = "owner"


def test_entries_evicted_behind_a_hot_oldest_entry_are_freed():
    """The oldest response stays hot (read before every write), so it heads the expiry order the
    whole time; every other response is evicted. Their instructions must go with them."""
    store = ResponseStore(ResponsesSettings(cache_entries=4))
    store.put(OWNER, response("hot", answer("hot-out")), [item("hot-in")])
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        for n in range(300):
            store.get(OWNER, "hot")
            evicted = {**response(f"r{n}", answer(f"r{n}-out")), "instructions": f"{n:06d}" + "i" * 50_000}
            store.put(OWNER, evicted, [item(f"r{n}-in")])
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    stats = store.stats()
    assert stats["entries"] == 4 and stats["evictions"] == 297
    assert stats["bytes"] < 4 * 51_000 + 4096
    assert grown < 2 * 1024 * 1024, f"{grown} bytes kept for 4 live entries of ~50 KB"  # 300 kept: ~15 MB


def test_a_snapshot_that_could_never_be_assembled_is_refused_when_saved():
    store = ResponseStore(ResponsesSettings(assembly_bytes=10_000))
    with pytest.raises(StorageCapacityError):
        store.put(OWNER, response("big", answer("big-out", "x" * 20_000)), [item("big-in")])
    assert store.stats()["entries"] == 0 and store.stats()["bytes"] == 0


def test_retrieving_reserves_only_the_output_not_the_history():
    store = ResponseStore(ResponsesSettings(assembly_bytes=30_000))
    store.put(OWNER, response("r", answer("r-out", "short")), [item("r-in", "h" * 20_000)])
    with store.assembling(15_000):  # another request is expanding 15 KB: the 20 KB history would not fit
        assert store.get(OWNER, "r")["output"][0]["content"][0]["text"] == "short"


def test_over_http_a_store_true_turn_over_assembly_bytes_is_a_413_before_generation(start_server):
    server = start_server(["ok"], environ={"MAYA_GLM_RESPONSES_ASSEMBLY_BYTES": "20000"})
    with server.http() as http:
        answer_ = http.post("/v1/responses", json={"input": "x" * 30_000, "store": True})
        small = http.post("/v1/responses", json={"input": "x" * 5_000, "store": True})
        fetched = http.get(f"/v1/responses/{small.json()['id']}")
    assert answer_.status_code == 413 and answer_.json()["error"]["code"] == "storage_capacity_exceeded"
    assert small.status_code == 200 and fetched.status_code == 200
    assert server.engine.calls == 1


def test_the_store_holds_about_what_it_counts():
    """orjson keeps a worst-case-sized buffer behind each result (80 KB of JSON can hold 519 KB):
    stored JSON is copied to its exact size, so memory tracks the counted bytes."""
    store = ResponseStore(ResponsesSettings(cache_entries=64))
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        for n in range(64):
            stored = {**response(f"r{n}", answer(f"r{n}-out", "a" * 20_000)), "instructions": f"{n}" + "i" * 40_000}
            store.put(OWNER, stored, [item(f"r{n}-in", "u" * 20_000)])
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    counted = store.stats()["bytes"]
    assert counted > 64 * 80_000
    assert held < 1.2 * counted, f"{held} bytes held for {counted} counted"
