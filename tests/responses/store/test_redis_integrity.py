"""The Redis store never serves less than it stored: a key Redis lost (evicted, deleted by hand) makes the read a
404 `stored_response_lost` and removes the broken entry, never a shorter history or a 500; a block shared by two
owners is each owner's own; reads answer on a Redis at its maxmemory, and a refused write makes Maya evict its own
least recently used entries; RECOUNT rebuilds every derived figure from the entries that exist. Each test runs
against a real redis-server (skipped, saying why, where none is installed)."""

from __future__ import annotations

import asyncio

import pytest

from maya_server.config import ServerConfig
from maya_server.errors import NotFoundError, StoreUnavailableError
from maya_server.responses.settings import ResponsesSettings
from maya_server.responses.store.opening import open_store
from maya_server.responses.store.packing import pack_item
from maya_server.responses.store.redis import digest

from tests.redis_server import RedisServer, command
from tests.responses.store_backends import SyncStore, open_sync_store, shared_redis
from tests.responses.store.test_core import answer, item, put_chain, response

A, B = "owner-a", "owner-b"


@pytest.fixture
def store():
    opened = open_sync_store("redis", ResponsesSettings())
    yield opened
    opened.close()


def scope(store, owner: str) -> str:
    return store.loop.run_until_complete(store.store.link.scope(owner))


def key(store, *parts: str) -> str:
    return store.store.prefix + ":".join(parts)


def block_key(store, owner: str, data: dict) -> str:
    return key(store, "b", scope(store, owner), digest(pack_item(data)))


def derived(store, url: str | None = None) -> dict:
    """Every key under the store's prefix and its value (but the salt and the recount lock), as Redis holds it."""
    url = url or shared_redis().url
    prefix = store.store.prefix.encode()
    out = {}
    for name in command(url, "KEYS", prefix + b"*"):
        short = name[len(prefix):].decode()
        kind = command(url, "TYPE", name)
        if short in ("salt", "recount"):
            continue
        if kind == b"hash":
            out[short] = command(url, "HGETALL", name)
        elif kind == b"zset":
            out[short] = command(url, "ZRANGE", name, 0, -1, "WITHSCORES")
        elif kind == b"list":
            out[short] = command(url, "LRANGE", name, 0, -1)
        else:
            out[short] = command(url, "GET", name)
    return out


def assert_lost(call, param: str | None = None) -> None:
    with pytest.raises(NotFoundError) as caught:
        call()
    error = caught.value.body()["error"]
    assert (caught.value.status, error["code"], error["type"], error["param"]) == (
        404, "stored_response_lost", "invalid_request_error", param)
    assert "lost part of it" in error["message"] and "store:false" in error["message"]


def assert_plain_404(call) -> None:
    with pytest.raises(NotFoundError) as caught:
        call()
    assert caught.value.body()["error"]["code"] == "not_found"


def assert_figures_true(store) -> None:
    """The figures the store counted equal what a recount of the keys that exist finds."""
    counted = store.stats()
    held = derived(store)
    store.recount()
    assert derived(store) == held
    assert (store.stats()["entries"], store.stats()["bytes"]) == (counted["entries"], counted["bytes"])


def three_turns(store, owner: str = A, prefix: str = "r") -> list[str]:
    return put_chain(store, owner, 3, prefix=prefix)


# -- sharing ------------------------------------------------------------------------------------
def test_one_block_under_two_owners_is_each_owners_own(store):
    shared_in, shared_out = item("u-same", "the same words"), answer("m-same", "the same answer")
    for owner, rid in ((A, "ra"), (B, "rb")):
        store.put(owner, response(rid, shared_out), [shared_in])
    store.delete(A, "ra")
    assert store.get(B, "rb") == response("rb", shared_out)
    assert [item_id for item_id, _ in store.input_items(B, "rb")] == ["u-same"]
    history = store.begin(B, "rb")
    assert [entry["id"] for entry in history.items()] == ["u-same", "m-same"]
    history.release()
    assert_figures_true(store)


def test_a_recount_of_an_intact_store_changes_nothing(store):
    for owner, p in ((A, "a"), (B, "b")):
        put_chain(store, owner, 5, prefix=p)
        base = store.begin(owner, f"{p}2")
        store.put(owner, response(f"{p}-branch", answer("b-out")), [item("b-in")], base)
        base.release()
        store.put(owner, response(f"{p}-single", answer("s-out", "same")), [item("s-in", "same")])
    store.delete(A, "a4")
    store.delete(B, "b1")
    before, stats = derived(store), store.stats()
    store.recount()
    assert derived(store) == before
    assert (store.stats()["entries"], store.stats()["bytes"]) == (stats["entries"], stats["bytes"])
    assert stats["entries"] == 12


# -- a lost key is a 404, never less -------------------------------------------------------------
@pytest.mark.parametrize("lose", ["block", "lineage", "envelope", "entry field", "entry"])
def test_a_lost_key_makes_each_read_a_404_lost_and_removes_the_entry(store, lose):
    url = shared_redis().url
    ids = three_turns(store)
    intact = three_turns(store, B, prefix="k")
    if lose == "block":  # the first answer: in the retrieved output of r0, the input of r1, the history of r2
        command(url, "DEL", block_key(store, A, answer("r0-out")))
    elif lose == "lineage":
        command(url, "DEL", key(store, "l", command(url, "HGET", key(store, "e", "r2"), "l").decode()))
    elif lose == "envelope":
        for rid in ids:
            envelope = command(url, "HGET", key(store, "e", rid), "env").decode()
            command(url, "DEL", key(store, "b", scope(store, A), envelope))
    else:
        for rid in ids:
            if lose == "entry":
                command(url, "DEL", key(store, "e", rid))
            else:
                command(url, "HDEL", key(store, "e", rid), "ie")
    lost_before = store.stats()["lost"]
    assert_lost(lambda: store.get(A, ids[0]))
    assert_lost(lambda: store.input_items(A, ids[1]))
    assert_lost(lambda: store.begin(A, ids[2]), "previous_response_id")
    assert store.stats()["lost"] == lost_before + 3  # (this stats() also ran the recount the loss asked for)
    assert store.stats()["recounts"] >= 1
    for rid in ids:
        assert command(url, "EXISTS", key(store, "e", rid)) == 0
        assert_plain_404(lambda: store.get(A, rid))  # removed: a later read is an ordinary 404
    assert store.get(B, intact[2])["id"] == intact[2]  # another conversation reads whole
    history = store.begin(B, intact[2])
    assert len(history.items()) == 6
    history.release()
    assert store.stats()["entries"] == 3
    assert_figures_true(store)


def test_deleting_a_broken_entry_is_a_404_lost_and_removes_it(store):
    ids = three_turns(store)
    command(shared_redis().url, "DEL", block_key(store, A, item("r1-in")))
    assert_lost(lambda: store.delete(A, ids[2]))
    assert_plain_404(lambda: store.get(A, ids[2]))
    assert store.get(A, ids[0])["id"] == ids[0]  # r0 does not use r1's input


def test_a_write_never_references_a_block_redis_lost(store):
    """A block counted but gone is written again; a continued lineage missing a block is written again from the
    continuation's own copy of the history."""
    url = shared_redis().url
    words = item("u1", "words said twice")
    store.put(A, response("first", answer("m1")), [words])
    command(url, "DEL", block_key(store, A, words))
    store.put(A, response("second", answer("m2")), [words])  # same content, same block: its refcount says held
    assert [item_id for item_id, _ in store.input_items(A, "second")] == ["u1"]

    ids = three_turns(store, prefix="c")
    base = store.begin(A, ids[2])
    command(url, "DEL", block_key(store, A, item("c0-in")))
    store.put(A, response("next", answer("n-out")), [item("n-in")], base)
    base.release()
    history = store.begin(A, "next")
    assert [entry["id"] for entry in history.items()] == ["c0-in", "c0-out", "c1-in", "c1-out", "c2-in", "c2-out",
                                                         "n-in", "n-out"]
    history.release()


# -- the recount ----------------------------------------------------------------------------------
def test_the_recount_brings_corrupted_figures_back(store):
    url = shared_redis().url
    put_chain(store, A, 4)
    put_chain(store, B, 4, prefix="b")
    true_state, true_stats = derived(store), store.stats()

    command(url, "HSET", key(store, "n"), "entries", 999)
    store.recount()
    assert derived(store) == true_state

    command(url, "DEL", key(store, "rc", scope(store, A)))
    store.recount()
    assert derived(store) == true_state

    command(url, "DEL", key(store, "n"))  # the figures vanished while the store believed it held entries
    stats = store.stats()  # the probe's step: it notices and recounts
    assert (stats["entries"], stats["bytes"], stats["recounts"]) == (true_stats["entries"], true_stats["bytes"], 3)
    assert {k: v for k, v in derived(store).items() if k != "n"} == {k: v for k, v in true_state.items() if k != "n"}
    for rid in ("r3", "r0", "r2", "r1"):
        store.delete(A, rid)
    assert store.stats()["bytes"] == store.owner_usage(B)[1] > 0
    assert not [name for name in derived(store) if scope(store, A) in name]


def test_the_recount_drops_orphans_and_fills_what_is_missing(store):
    url = shared_redis().url
    ids = three_turns(store)
    true_state = derived(store)
    command(url, "SET", key(store, "b", scope(store, A), "0" * 24), "an orphan")
    command(url, "ZADD", key(store, "lru"), 5, "ghost")
    command(url, "ZREM", key(store, "exp"), ids[1])
    command(url, "DEL", key(store, "u", command(url, "HGET", key(store, "e", ids[0]), "l").decode()))
    store.recount()
    assert derived(store) == true_state


def test_a_recount_waits_for_a_reason_and_takes_the_fleets_lock(store):
    three_turns(store)
    assert store.stats()["recounts"] == 0  # nothing lost, no eviction, figures there: no recount
    command(shared_redis().url, "DEL", block_key(store, A, answer("r0-out")))
    with pytest.raises(NotFoundError):
        store.get(A, "r0")
    command(shared_redis().url, "SET", key(store, "recount"), 1, "PX", 60_000)  # another replica recounts now
    assert store.stats()["recounts"] == 0
    command(shared_redis().url, "DEL", key(store, "recount"))
    assert store.stats()["recounts"] == 1
    assert store.stats()["recounts"] == 1  # done: no reason left


@pytest.mark.parametrize("index", ["exp", "lru", "g", "ob", "oe"])
def test_a_fleet_index_deleted_by_hand_is_rebuilt_by_the_next_probe(store, index):
    """A hand DEL raises no `evicted_keys` and no read may ever meet the lost index (an expiry index nobody reads
    until an entry is due): the probe sees it gone while entries are counted and recounts."""
    three_turns(store)
    true_state = derived(store)
    assert store.stats()["recounts"] == 0
    command(shared_redis().url, "DEL", key(store, index))
    assert store.stats()["recounts"] == 1
    rebuilt = derived(store)
    if index == "g":  # the lineages' generations are new ones: a continuation in flight writes its history again
        assert rebuilt.pop("g").keys() == true_state.pop("g").keys()
    assert rebuilt == true_state


def test_a_replica_that_loses_the_recount_race_hands_the_evictions_it_saw_to_the_fleet():
    """Redis evicted keys (INFO's evicted_keys grew) while another replica held the fleet's recount lock: the
    replica that saw it cannot recount now, and its next look at INFO shows no new eviction; the fleet still
    recounts once the lock is free (the replica left `P dirty`), whichever replica probes next."""
    redis = RedisServer()
    first, second = own_redis_store(redis), own_redis_store(redis)
    try:
        three_turns(first)
        first.stats(), second.stats()  # both have seen Redis as it is: no eviction yet
        recounts = first.stats()["recounts"] + second.stats()["recounts"]
        command(redis.url, "SET", first.store.prefix + "recount", 1, "PX", 600_000)  # a replica recounts now
        command(redis.url, "CONFIG", "SET", "maxmemory-policy", "volatile-ttl")  # the shortest TTLs go first
        command(redis.url, "CONFIG", "SET", "maxmemory", used_memory(redis.url) + 200_000)
        for n in range(100):  # someone else's keys on the same Redis: Redis evicts them to take more
            command(redis.url, "SET", f"other:{n}", "x" * 10_000, "EX", 100)
        command(redis.url, "CONFIG", "SET", "maxmemory", 0)
        assert int(command(redis.url, "INFO", "stats")["evicted_keys"]) > 0
        assert first.stats()["recounts"] + second.stats()["recounts"] == recounts  # the lock held: none now
        command(redis.url, "DEL", first.store.prefix + "recount")
        assert first.stats()["recounts"] + second.stats()["recounts"] == recounts + 1
        assert first.stats()["recounts"] + second.stats()["recounts"] == recounts + 1  # once, not per replica
    finally:
        first.close()
        second.close()
        redis.stop()


# -- a full Redis -------------------------------------------------------------------------------------
def own_redis_store(redis: RedisServer, **limits) -> SyncStore:
    cfg = ServerConfig(engine="scripted", store=redis.url)
    return SyncStore(open_store(cfg, ResponsesSettings(**limits)), asyncio.new_event_loop())


def used_memory(url: str) -> int:
    info = command(url, "INFO", "memory")
    return int(info["used_memory"])


def test_reads_answer_on_a_full_redis_and_a_write_makes_room_by_itself():
    """Sizes well above Redis's own noise: what Redis frees for what Maya counts varies by tens of kB (its Lua
    heap grows between collections, allocator size classes)."""
    redis = RedisServer()  # noeviction: Redis's default policy
    store = own_redis_store(redis)
    try:
        words = "w" * 20_000
        for n in range(10):
            store.put(A, response(f"c{n}-0", answer(f"c{n}-0-out", words)), [item(f"c{n}-0-in", words)])
            base = store.begin(A, f"c{n}-0")
            store.put(A, response(f"c{n}-1", answer(f"c{n}-1-out", words)), [item(f"c{n}-1-in", words)], base)
            base.release()
        store.stats()  # the probe's first step (it has the rare scripts loaded while there is room)
        command(redis.url, "CONFIG", "SET", "maxmemory", used_memory(redis.url) - 10_000)
        with pytest.raises(Exception) as refused:  # Redis itself now refuses writes that grow memory
            command(redis.url, "SET", "probe", "x" * 100)
        assert "maxmemory" in str(refused.value)
        for n in range(10):
            assert store.get(A, f"c{n}-1") == response(f"c{n}-1", answer(f"c{n}-1-out", words))
            assert [i for i, _ in store.input_items(A, f"c{n}-1")] == [f"c{n}-0-in", f"c{n}-0-out", f"c{n}-1-in"]
            history = store.begin(A, f"c{n}-1")
            assert len(history.items()) == 4
            history.release()
        command(redis.url, "CONFIG", "SET", "maxmemory", used_memory(redis.url) + 50_000)  # just above what it uses
        bigger = "b" * 40_000
        for n in range(12):  # each refused write evicts the least recently used entries and goes through
            store.put(A, response(f"new{n}", answer(f"new{n}-out", bigger)), [item(f"new{n}-in", bigger)])
            assert store.get(A, f"new{n}")["id"] == f"new{n}"
        assert store.stats()["evictions"] > 0
        assert_plain_404(lambda: store.get(A, "c0-0"))  # the least recently used went first

        command(redis.url, "CONFIG", "SET", "maxmemory", 1)  # nothing Maya can evict makes room now
        with pytest.raises(StoreUnavailableError) as caught:
            store.put(A, response("never", answer("never-out")), [item("never-in")])
        assert caught.value.status == 503 and caught.value.body()["error"]["code"] == "store_unavailable"
        assert "maxmemory" in caught.value.message
    finally:
        store.close()
        redis.stop()
