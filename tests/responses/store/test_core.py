"""The response store on its own: sharing, limits, TTL, LRU, quotas and the assembly budget.

One contract, two backends: every test runs on the memory store and on the Redis store (a real
redis-server; skipped, saying why, where it is not installed). Byte figures that depend on how a backend
keeps its bytes read the backend's own overheads (`store_backends.py`)."""

from __future__ import annotations

import orjson
import pytest

from maya_server.errors import NotFoundError, ServiceUnavailableError, StorageCapacityError
from maya_server.responses.settings import ResponsesSettings

from tests.responses.store_backends import (
    SyncStore, backend, envelope_overhead, open_sync_store, reference_bytes, response_overhead,
)

A, B = "owner-a", "owner-b"
__all__ = ["backend"]  # the fixture every test here is parametrized by


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def make_store(backend):
    """make_store(**limits) → (a store of this test's backend, its clock); closed after the test."""
    stores: list[SyncStore] = []

    def make(**limits) -> tuple[SyncStore, Clock]:
        clock = Clock()
        stores.append(open_sync_store(backend, ResponsesSettings(**limits), clock))
        return stores[-1], clock

    yield make
    for store in stores:
        store.close()


def item(item_id: str, text: str = "x") -> dict:
    return {"id": item_id, "type": "message", "role": "user", "status": "completed",
            "content": [{"type": "input_text", "text": text}]}


def response(response_id: str, *outputs: dict, previous: str | None = None) -> dict:
    return {"id": response_id, "object": "response", "created_at": 1, "status": "completed", "completed_at": 2,
            "error": None, "incomplete_details": None, "model": "m", "previous_response_id": previous,
            "tools": [], "output": list(outputs), "usage": {"input_tokens": 1, "output_tokens": 1}}


def answer(item_id: str, text: str = "ok") -> dict:
    return {"id": item_id, "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def put_chain(store: SyncStore, owner: str, depth: int, prefix: str = "r") -> list[str]:
    """A conversation of `depth` stored turns, each continuing the previous one."""
    ids = []
    base = None
    for turn in range(depth):
        rid = f"{prefix}{turn}"
        store.put(owner, response(rid, answer(f"{rid}-out"), previous=ids[-1] if ids else None),
                  [item(f"{rid}-in")], base)
        if base is not None:
            base.release()
        base = store.begin(owner, rid)
        ids.append(rid)
    base.release()
    return ids


def unique_item_bytes(store: SyncStore, owner: str, rid: str) -> int:
    return sum(len(data) for _, data in store.input_items(owner, rid))


def input_ids(store: SyncStore, owner: str, rid: str) -> list[str]:
    return [item_id for item_id, _ in store.input_items(owner, rid)]


# -- round trip and history ---------------------------------------------------------------
def test_a_stored_response_comes_back_as_it_was(make_store):
    store, _ = make_store()
    original = response("r1", answer("m1"))
    store.put(A, original, [item("u1")])
    assert store.get(A, "r1") == original
    assert [orjson.loads(data)["id"] for _, data in store.input_items(A, "r1")] == ["u1"]


def test_full_usage_is_kept_compactly_and_comes_back_whole(make_store):
    store, _ = make_store()
    usage = {"input_tokens": 9, "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 0},
             "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 14}
    original = {**response("r1", answer("m1")), "usage": usage}
    store.put(A, original, [])
    assert store.get(A, "r1") == original
    odd = {**response("r2", answer("m2")), "usage": {**usage, "extra": 1}}  # any other shape is kept as it is
    store.put(A, odd, [])
    assert store.get(A, "r2") == odd


def test_a_continuation_sees_the_whole_history_flat(make_store):
    store, _ = make_store()
    put_chain(store, A, 4)
    base = store.begin(A, "r3")
    assert [i["id"] for i in base.items()] == [
        "r0-in", "r0-out", "r1-in", "r1-out", "r2-in", "r2-out", "r3-in", "r3-out"]
    base.release()
    assert input_ids(store, A, "r3") == ["r0-in", "r0-out", "r1-in", "r1-out", "r2-in", "r2-out", "r3-in"]


def test_a_chain_stores_each_item_once(make_store):
    store, _ = make_store()
    put_chain(store, A, 50)
    stats = store.stats()
    unique = unique_item_bytes(store, A, "r49") + len(orjson.dumps(answer("r49-out")))
    # unique items + one slot per item + each entry's small JSON and one shared envelope
    overhead = 100 * response_overhead(store)  # on Redis: each block's and each entry's keys
    assert stats["bytes"] < unique * 2 + overhead
    per_entry = (stats["bytes"] - unique - 100 * reference_bytes(store) - overhead // 2) / 50
    assert per_entry < 300


def test_branching_copies_references_not_items(make_store):
    store, _ = make_store()
    put_chain(store, A, 3)
    before = store.stats()["bytes"]
    base = store.begin(A, "r1")  # not the tip: r2 continued it
    store.put(A, response("branch", answer("b-out")), [item("b-in")], base)
    base.release()
    added = store.stats()["bytes"] - before
    new_blocks = len(orjson.dumps(item("b-in"))) + len(orjson.dumps(answer("b-out")))
    copied_slots = 4 * reference_bytes(store)  # r0-in r0-out r1-in r1-out
    assert added < new_blocks + copied_slots + 6 * reference_bytes(store) + 400 + 2 * response_overhead(store)
    assert input_ids(store, A, "branch") == ["r0-in", "r0-out", "r1-in", "r1-out", "b-in"]
    assert input_ids(store, A, "r2") == ["r0-in", "r0-out", "r1-in", "r1-out", "r2-in"]


def test_deleting_an_ancestor_leaves_descendants_whole(make_store):
    store, _ = make_store()
    put_chain(store, A, 3)
    store.delete(A, "r0")
    store.delete(A, "r1")
    with pytest.raises(NotFoundError):
        store.get(A, "r0")
    assert len(store.input_items(A, "r2")) == 5
    assert store.get(A, "r2")["output"][0]["id"] == "r2-out"


def test_deleting_everything_frees_every_byte(make_store):
    store, _ = make_store()
    put_chain(store, A, 5)
    for rid in ("r2", "r0", "r4", "r1", "r3"):
        store.delete(A, rid)
    assert store.stats()["bytes"] == 0
    assert store.owner_usage(A) == (0, 0)


def test_deleting_the_tip_frees_its_items_and_the_new_tip_appends_again(make_store):
    store, _ = make_store()
    put_chain(store, A, 3)
    before_tip = store.stats()["bytes"]
    store.put(A, response("r3", answer("r3-out", "z" * 500)), [item("r3-in")], base := store.begin(A, "r2"))
    base.release()
    store.delete(A, "r3")
    assert store.stats()["bytes"] == before_tip
    base = store.begin(A, "r2")
    lineage = base.lineage
    store.put(A, response("r4", answer("r4-out")), [item("r4-in")], base)
    base.release()
    assert store.begin(A, "r4").lineage == lineage  # appended to the chain's lineage, not copied


def test_a_pinned_history_survives_deleting_the_response(make_store):
    store, _ = make_store()
    put_chain(store, A, 2)
    base = store.begin(A, "r1")
    store.delete(A, "r1")
    store.delete(A, "r0")
    store.put(A, response("r2", answer("r2-out")), [item("r2-in")], base)
    base.release()
    assert input_ids(store, A, "r2") == ["r0-in", "r0-out", "r1-in", "r1-out", "r2-in"]


# -- isolation --------------------------------------------------------------------------------
def test_other_owners_get_not_found_everywhere(make_store):
    store, _ = make_store()
    store.put(A, response("r1", answer("m1")), [item("u1")])
    for call in (lambda: store.get(B, "r1"), lambda: store.begin(B, "r1"), lambda: store.input_items(B, "r1"),
                 lambda: store.delete(B, "r1")):
        with pytest.raises(NotFoundError):
            call()
    assert store.get(A, "r1")["id"] == "r1"
    assert store.stats()["misses"] == 4


# -- TTL -----------------------------------------------------------------------------------------
def test_entries_expire_a_fixed_time_after_completion_even_when_read(make_store):
    store, clock = make_store(cache_ttl_s=60)
    store.put(A, response("r1", answer("m1")), [item("u1")])
    clock.now += 59
    store.get(A, "r1")  # reading does not extend the TTL
    clock.now += 1
    with pytest.raises(NotFoundError):
        store.get(A, "r1")
    stats = store.stats()
    assert stats["expirations"] == 1 and stats["entries"] == 0 and stats["bytes"] == 0


def test_insertion_drops_expired_entries(make_store):
    store, clock = make_store(cache_ttl_s=60)
    store.put(A, response("old", answer("m1")), [item("u1")])
    clock.now += 61
    store.put(A, response("new", answer("m2")), [item("u2")])
    assert store.stats()["expirations"] == 1
    assert store.owner_usage(A)[0] == 1


# -- LRU and limits -------------------------------------------------------------------------------
def test_least_recently_used_is_evicted_first(make_store):
    store, _ = make_store(cache_entries=3)
    for rid in ("r1", "r2", "r3"):
        store.put(A, response(rid, answer(rid + "-out")), [item(rid + "-in")])
    store.get(A, "r1")  # r2 is now the least recently used
    store.put(A, response("r4", answer("r4-out")), [item("r4-in")])
    with pytest.raises(NotFoundError):
        store.get(A, "r2")
    for rid in ("r1", "r3", "r4"):
        store.get(A, rid)
    assert store.stats()["evictions"] == 1


def test_byte_limit_evicts_least_recent_until_the_new_response_fits(make_store):
    store, _ = make_store()
    size = len(orjson.dumps(answer("r0-out", "z" * 1000))) + response_overhead(store)
    limit = 3 * size + 1000 + envelope_overhead(store)  # room for three such responses and their small JSON, not four
    store, _ = make_store(cache_bytes=limit)
    for n in range(6):
        store.put(A, response(f"r{n}", answer(f"r{n}-out", "z" * 1000)), [])
        assert store.stats()["bytes"] <= limit
    assert store.stats()["entries"] == 3
    assert store.stats()["evictions"] == 3
    for n in (3, 4, 5):
        store.get(A, f"r{n}")


def test_a_snapshot_over_entry_bytes_is_refused_and_nothing_changes(make_store):
    store, _ = make_store(entry_bytes=2000)
    store.put(A, response("small", answer("s")), [item("u")])
    before = store.stats()
    with pytest.raises(StorageCapacityError) as caught:
        store.put(A, response("big", answer("b", "z" * 3000)), [item("u2")])
    assert caught.value.status == 413 and caught.value.code == "storage_capacity_exceeded"
    after = store.stats()
    assert after["entries"] == before["entries"] and after["bytes"] == before["bytes"]
    assert after["rejections"] == 1
    with pytest.raises(NotFoundError):
        store.get(A, "big")


def test_owner_entry_quota_evicts_only_that_owners_entries(make_store):
    store, _ = make_store(owner_entries=2)
    store.put(B, response("b1", answer("b1-out")), [item("b1-in")])
    for rid in ("a1", "a2", "a3"):
        store.put(A, response(rid, answer(rid + "-out")), [item(rid + "-in")])
    assert store.owner_usage(A)[0] == 2
    with pytest.raises(NotFoundError):
        store.get(A, "a1")
    assert store.get(B, "b1")["id"] == "b1"


def test_owner_byte_quota_evicts_only_that_owners_entries(make_store):
    store, _ = make_store()
    size = len(orjson.dumps(answer("x", "z" * 1000))) + response_overhead(store)
    quota = 2 * size + 1500 + envelope_overhead(store)
    store, _ = make_store(owner_bytes=quota)
    store.put(B, response("b1", answer("b1-out", "z" * 1000)), [])
    for rid in ("a1", "a2", "a3", "a4"):
        store.put(A, response(rid, answer(rid + "-out", "z" * 1000)), [])
        assert store.owner_usage(A)[1] <= quota
    assert store.get(B, "b1")["id"] == "b1"
    with pytest.raises(StorageCapacityError):
        store.put(A, response("huge", answer("h", "z" * 5000)), [])


def test_an_entry_over_the_owner_quota_alone_is_refused_before_evicting(make_store):
    store, _ = make_store(owner_bytes=3000)
    store.put(A, response("a1", answer("a1-out")), [])
    with pytest.raises(StorageCapacityError):
        store.check_fits(3001)
    store.get(A, "a1")


# -- assembly budget ---------------------------------------------------------------------------------
def test_assembly_pressure_is_a_503_and_drops_nothing(make_store):
    store, _ = make_store(assembly_bytes=1500)
    store.put(A, response("r1", answer("r1-out", "z" * 600)), [item("u1")])
    first = store.begin(A, "r1")
    with pytest.raises(ServiceUnavailableError) as caught:
        store.begin(A, "r1")
    assert caught.value.status == 503
    assert store.stats()["assembly_rejections"] == 1
    assert store.stats()["assembly_bytes_in_flight"] == first.reserved
    first.release()
    first.release()  # idempotent
    assert store.stats()["assembly_bytes_in_flight"] == 0
    second = store.begin(A, "r1")
    assert len(second.items()) == 2
    second.release()


def test_counters_after_a_sequence(make_store):
    store, _ = make_store(cache_entries=2)
    put_chain(store, A, 3)  # 3 writes, 3 begins (hits), 1 eviction
    store.get(A, "r2")
    with pytest.raises(NotFoundError):
        store.get(A, "r0")
    store.delete(A, "r2")
    stats = store.stats()
    assert (stats["writes"], stats["hits"], stats["misses"], stats["evictions"], stats["deletions"]) == (3, 5, 1, 1, 1)
    assert stats["entries"] == 1
