"""The shared store deletes only what Redis lost: one missing bookkeeping key (a refcount hash, a users set, the
figures hash, the generations hash, the LRU index, an entry hash that is still counted) never wipes a key's
conversations, serves or stores another turn's content, or stops writes.

Each case reproduced (before issue 54's store, main at 5d96a60) with ONE hand `DEL` (or, where said, the few DELs
one `allkeys-lru` run made, or a few of the same kind) on a normal `noeviction` Redis: no eviction, no restart,
often with a continuation in flight (a `begin` whose `put` comes after the DEL), which is how a busy fleet meets
them. What Maya's keys are is `maya_server/responses/store/redis_lua.py`'s docstring; these tests only read the key
names they DEL from it (`e:RID`, `l:LID`, `u:LID`, `rc:O`, `n`, `lru`, `lru:O`, `b:O:DIGEST`) and read lineage ids
from the entry hash (field `l`) rather than assume their shape. Everything else is asserted on what the store's
reads return and what stays stored.

The last three tests close gaps a mutation audit of the Lua found (a removed check that no test noticed): they
passed before that work too, and fail on the mutant they name. Against a real redis-server (skipped, saying why,
where none is installed)."""

from __future__ import annotations

import pytest

from maya_server.errors import NotFoundError, StorageCapacityError
from maya_server.responses.settings import ResponsesSettings
from maya_server.responses.store.packing import pack_envelope, pack_item
from maya_server.responses.store.redis import digest

from tests.redis_server import RedisServer, command
from tests.responses.store_backends import open_sync_store, shared_redis
from tests.responses.store.test_core import answer, item, put_chain, response
from tests.responses.store.test_redis_integrity import (
    assert_lost, assert_plain_404, block_key, key, own_redis_store, scope, used_memory,
)

A, B = "owner-a", "owner-b"


@pytest.fixture
def stores():
    """open(**limits) → a Redis store on the shared redis-server under its own prefix; closed after the test."""
    opened = []

    def open_(**limits):
        opened.append(open_sync_store("redis", ResponsesSettings(**limits)))
        return opened[-1]

    yield open_
    for store in opened:
        store.close()


@pytest.fixture
def store(stores):
    return stores()


def history_ids(store, owner: str, rid: str) -> list[str]:
    history = store.begin(owner, rid)
    try:
        return [entry["id"] for entry in history.items()]
    finally:
        history.release()


def input_ids(store, owner: str, rid: str) -> list[str]:
    return [item_id for item_id, _ in store.input_items(owner, rid)]


def assert_whole(store, owner: str, stored: dict, inputs: list[str]) -> None:
    """`stored` reads back exactly as it was stored: retrieved, listed (its inputs `inputs`) and continued (its
    history: those inputs, then its own output)."""
    rid = stored["id"]
    assert store.get(owner, rid) == stored, rid
    assert input_ids(store, owner, rid) == inputs, rid
    assert history_ids(store, owner, rid) == inputs + [out["id"] for out in stored["output"]], rid


def single(store, owner: str, rid: str, words: str = "x") -> dict:
    """One stored single-turn response (input `rid-in`, output `rid-out`); all of an owner's share one envelope."""
    stored = response(rid, answer(f"{rid}-out", words))
    store.put(owner, stored, [item(f"{rid}-in", words)])
    return stored


def chain(store, owner: str, depth: int, prefix: str) -> list[tuple[dict, list[str]]]:
    """`put_chain`'s conversation, with what each turn stored and its input ids (for `assert_whole`)."""
    ids = put_chain(store, owner, depth, prefix=prefix)
    out, inputs = [], []
    for n, rid in enumerate(ids):
        inputs = inputs + [f"{rid}-in"]
        out.append((response(rid, answer(f"{rid}-out"), previous=ids[n - 1] if n else None), list(inputs)))
        inputs = inputs + [f"{rid}-out"]
    return out


def lineage_of(store, rid: str) -> str:
    return command(shared_redis().url, "HGET", key(store, "e", rid), "l").decode()


def branch_then_finish(store, base, first: tuple[dict, list[str]]) -> None:
    """rB continues r0 (appending where r1 was), then the continuation of r1 in flight (`base`) stores rA: each
    must be stored with the history its model saw, r0 r1 rA and r0 rB, never r0 rB rA."""
    b0 = store.begin(A, "r0")
    rb = response("rB", answer("rB-out"), previous="r0")
    store.put(A, rb, [item("rB-in")], b0)
    b0.release()
    ra = response("rA", answer("rA-out"), previous="r1")
    store.put(A, ra, [item("rA-in")], base)
    base.release()
    assert history_ids(store, A, "rA") == ["r0-in", "r0-out", "r1-in", "r1-out", "rA-in", "rA-out"]
    assert history_ids(store, A, "rB") == ["r0-in", "r0-out", "rB-in", "rB-out"]
    assert_whole(store, A, ra, ["r0-in", "r0-out", "r1-in", "r1-out", "rA-in"])
    assert_whole(store, A, rb, ["r0-in", "r0-out", "rB-in"])
    assert_whole(store, A, *first)


# -- 1. a lost refcount hash ---------------------------------------------------------------------------------
def test_a_lost_refcount_hash_never_wipes_the_owners_other_responses(store):
    """`rc:O` gone (one DEL), then one response of the owner found broken (its output block gone too): the fixed
    store removes that one response and nothing else. Before the fix, removing it decrements a refcount the hash no
    longer has (HINCRBY from nothing: -1), so the owner's envelope block, shared by all ten responses, is deleted
    with it: every other response of the owner is lost, a DELETE of another is a 404 lost, and the recount removes
    them all. The store must treat a refcount it cannot read as unknown (never delete a block on it), so: the broken
    response is a 404 `stored_response_lost`, a DELETE of another succeeds, the other eight read whole (retrieve,
    input_items, continue) before and after a recount, and the other owner is untouched."""
    url = shared_redis().url
    mine = [single(store, A, f"a{n}") for n in range(10)]
    theirs = [single(store, B, f"b{n}") for n in range(2)]
    assert len({command(url, "HGET", key(store, "e", f"a{n}"), "env") for n in range(10)}) == 1  # one envelope

    command(url, "DEL", key(store, "rc", scope(store, A)))
    command(url, "DEL", block_key(store, A, answer("a3-out", "x")))
    assert_lost(lambda: store.get(A, "a3"))
    store.delete(A, "a5")
    assert_plain_404(lambda: store.get(A, "a5"))
    kept = [stored for stored in mine if stored["id"] not in ("a3", "a5")]
    for stored in kept:
        assert_whole(store, A, stored, [f"{stored['id']}-in"])
    store.recount()
    for stored in kept:
        assert_whole(store, A, stored, [f"{stored['id']}-in"])
    for stored in theirs:
        assert_whole(store, B, stored, [f"{stored['id']}-in"])
    assert store.stats()["entries"] == 10


# -- 2. a lost users set -----------------------------------------------------------------------------------
def test_a_lost_users_set_never_wipes_a_conversation_when_its_tip_is_deleted(store):
    """`u:LID` gone (one DEL), then the conversation's last turn deleted. Before the fix, the delete finds the users set
    empty, takes the lineage for unused and drops it with every block: the two earlier turns, still stored and
    whole a moment before, are lost. The store must never cut a lineage back on a users set it cannot
    trust (a missing one is unknown, not empty): r2 is gone (a plain 404), r0 and r1 read whole, before and after
    a recount."""
    turns = chain(store, A, 3, "r")
    command(shared_redis().url, "DEL", key(store, "u", lineage_of(store, "r2")))
    store.delete(A, "r2")
    assert_plain_404(lambda: store.get(A, "r2"))
    for stored, inputs in turns[:2]:
        assert_whole(store, A, stored, inputs)
    store.recount()
    for stored, inputs in turns[:2]:
        assert_whole(store, A, stored, inputs)


# -- 3. a lost lineage counter ------------------------------------------------------------------------------
def test_a_lost_lineage_counter_never_gives_a_continuation_another_conversations_history(store):
    """The figures hash `n` (which holds the lineage counter) gone (one DEL) while a continuation of c1 is in
    flight, and the client deletes c0 and c1 meanwhile (their lineage is dropped). Before the fix, the counter
    starts again at 1, so the next new conversation (d0, d1) gets the dropped lineage's id again, at the same
    generation and length; the continuation's write then finds "its" lineage as it left it and appends to it: cx is
    stored with d's turns as its history, not the c turns its model saw. The store must never give a lineage id
    twice (ids that cannot repeat, e.g. random strings), so the write sees its lineage gone and writes the history
    it holds again: cx's history is c0, c1, cx, and d reads whole.

    (With the conversation still stored, a lost counter did no harm even then: PUT skips ids whose lineage keys
    exist; the second half checks that too.)"""
    url = shared_redis().url
    chain(store, A, 2, "c")
    base = store.begin(A, "c1")
    store.delete(A, "c1")
    store.delete(A, "c0")
    command(url, "DEL", key(store, "n"))
    d = chain(store, A, 2, "d")
    cx = response("cx", answer("cx-out"), previous="c1")
    store.put(A, cx, [item("cx-in")], base)
    base.release()
    assert history_ids(store, A, "cx") == ["c0-in", "c0-out", "c1-in", "c1-out", "cx-in", "cx-out"]
    assert_whole(store, A, cx, ["c0-in", "c0-out", "c1-in", "c1-out", "cx-in"])
    for stored, inputs in d:
        assert_whole(store, A, stored, inputs)

    e = chain(store, A, 2, "e")  # a stored conversation, the counter lost again, a new one
    command(url, "DEL", key(store, "n"))
    f = chain(store, A, 2, "f")
    for stored, inputs in e + f + d:
        assert_whole(store, A, stored, inputs)


def test_a_lineage_id_freed_by_evictions_never_serves_another_conversations_content(store):
    """What `allkeys-lru` did in one run of `tests/responses/api/test_store_eviction_load.py` (1 run in 60 on
    Redis 7.0; `bench/store_eviction_loop.py`): it evicted the figures hash `n` (the lineage counter), the
    generations hash `g`, and one conversation's lineage list and users set, while that conversation's entries
    stayed. Before the fix, the counter restarts, PUT finds no key of that lineage id left and gives it to a new
    conversation, whose turns then fill the list the old entries point into: retrieving c1 answers 200 with
    d1's output, input_items lists d's turns, a continuation is generated on d's history. The store must
    never give a lineage id that entries may still name (ids that cannot repeat): c0 and c1, whose lineage is
    gone, are 404 `stored_response_lost`, and d reads whole."""
    url = shared_redis().url
    chain(store, A, 2, "c")
    lineage = lineage_of(store, "c1")
    for name in ("n", "g", f"l:{lineage}", f"u:{lineage}"):
        command(url, "DEL", key(store, name))
    d = chain(store, A, 2, "d")
    for call in (lambda: store.get(A, "c1"), lambda: input_ids(store, A, "c0")):
        try:
            served = call()
        except NotFoundError as error:
            assert (error.status, error.body()["error"]["code"]) == (404, "stored_response_lost")
        else:
            pytest.fail(f"a response whose lineage is gone was served: {served}")
    for stored, inputs in d:
        assert_whole(store, A, stored, inputs)


def test_a_lost_generations_hash_never_lets_a_continuation_store_a_wrong_history(store):
    """The same wrong history through the generations hash `g` (one DEL). r2 was deleted (the lineage cut back
    once: generation 1) and a continuation of r1 is in flight, holding generation 1; then `g` is lost and the
    client deletes r1. Before the fix, the cut-back counts the generation from nothing again, back to 1; rB continues r0
    and appends to the lineage, and the in-flight write finds generation 1 and the length it read: rA is stored
    with r0, rB, rA as its history. The store must never let a lost generation look like the one a
    continuation holds (a missing generation is unknown: the write treats its lineage as changed and writes the
    history it holds again)."""
    turns = chain(store, A, 3, "r")
    store.delete(A, "r2")
    base = store.begin(A, "r1")
    command(shared_redis().url, "DEL", key(store, "g"))
    store.delete(A, "r1")
    branch_then_finish(store, base, turns[0])


# -- 4. RECOUNT trims a lineage under a continuation in flight ---------------------------------------------
def test_a_recount_that_cuts_a_lineage_back_never_lets_a_continuation_store_a_wrong_history(store):
    """A continuation of r1 is in flight when r1's entry vanishes (one DEL) and a recount cuts the lineage back to
    r0's end. Another turn then continues r0 (rB), which appends to the same lineage. Before the fix, RECOUNT trims
    the lineage without bumping its generation, so the in-flight write finds the lineage at the generation and
    length it read and appends to it: rA is stored with r0, rB, rA as its history, which is not what its model saw.
    The fixed store must make any cut-back (by RECOUNT too) visible to a continuation in flight, which then writes
    the history it holds again: rA's history is r0, r1, rA, and rB's is r0, rB."""
    turns = chain(store, A, 2, "r")
    base = store.begin(A, "r1")
    command(shared_redis().url, "DEL", key(store, "e", "r1"))
    store.recount()
    branch_then_finish(store, base, turns[0])


# -- 5. a lost LRU index at the entry bound ----------------------------------------------------------------
@pytest.mark.parametrize("bound", ["fleet", "owner"])
def test_a_lost_lru_index_at_the_entry_bound_never_refuses_writes(stores, bound):
    """At the entry bound (the fleet's `cache_entries`, or the owner's `owner_entries`), the LRU index that names
    who to evict (`lru`, or the owner's `lru:O`) gone (one DEL). Before the fix, every later write finds nobody to
    evict but itself and is refused (`StorageCapacityError`, "cannot make room"), for good: nothing rebuilds the
    index, since no read finds a lost piece. The store must still evict by some order (rebuild the index, or fall
    back on the entries it can find) so the write goes through and the bound holds."""
    store = stores(cache_entries=5) if bound == "fleet" else stores(owner_entries=5)
    url = shared_redis().url
    for n in range(5):
        single(store, A, f"r{n}")
    command(url, "DEL", key(store, "lru") if bound == "fleet" else key(store, "lru", scope(store, A)))
    for n in range(5, 8):
        try:
            stored = single(store, A, f"r{n}")
        except StorageCapacityError as refused:
            pytest.fail(f"write {n - 4} after the lost index refused: {refused.message}")
        assert_whole(store, A, stored, [f"r{n}-in"])
    assert store.stats()["entries"] <= 5
    assert store.owner_usage(A)[0] <= 5
    assert len(command(url, "KEYS", key(store, "e:*"))) <= 5


# -- 6. ghost entries ----------------------------------------------------------------------------------------
def test_entries_redis_lost_are_never_paid_for_with_intact_ones(stores):
    """Three entry hashes gone (three DELs of `e:RID`): ghosts, still counted in the figures and still listed in the
    LRU. At the entry bound, each new write evicts the LRU's oldest; before the fix, removing a ghost frees nothing
    in the figures (its owner is unknown), so the write goes on evicting until the count drops: three new responses
    cost the three ghosts and three intact responses too. The store must count a ghost's removal as one entry freed
    (or recount first): the seven intact responses stay, and the store holds ten."""
    store = stores(cache_entries=10)
    url = shared_redis().url
    old = [single(store, A, f"r{n}") for n in range(10)]
    for n in range(3):
        command(url, "DEL", key(store, "e", f"r{n}"))
    new = [single(store, A, f"n{n}") for n in range(3)]
    for stored in old[3:] + new:
        assert_whole(store, A, stored, [f"{stored['id']}-in"])
    assert store.stats()["entries"] == 10
    assert len(command(url, "KEYS", key(store, "e:*"))) == 10


# -- 7. mutation-audit gaps ----------------------------------------------------------------------------------
def test_a_continuation_without_a_hint_for_its_lineage_never_takes_a_lost_block_from_the_replicas_copy(store):
    """The replica holds every block of r0..r2 in its block cache, and hints for the owner, but none valid for
    this lineage (r2 was deleted, which cut the lineage back and bumped its generation). A block of r0 is then
    lost in Redis. `begin(r1)` runs READ in `hinted` mode with no hint for the lineage (no bytes sent: the replica
    would take every block from its copy); Redis must still check every block, so the read is a 404
    `stored_response_lost`. Catches the mutant that skips `blocks_missing` when READ finds no hint (skipped=-1)."""
    url = shared_redis().url
    chain(store, A, 3, "r")
    s0 = single(store, A, "s0")  # another lineage of the owner: its hint stays valid
    store.delete(A, "r2")
    lost = digest(pack_item(item("r0-in")))
    own = scope(store, A)
    assert lost in store.store.blocks.held(own, [lost])  # the replica still holds the block Redis will lose
    command(url, "DEL", key(store, "b", own, lost))
    modes = []
    run = store.store._run

    async def spy(name, args):
        if name == "READ":
            modes.append(args[3])  # owner rid now mode (`_run` puts P BLOCK SLOT LINEAGE first)
        return await run(name, args)

    store.store._run = spy
    assert_lost(lambda: store.begin(A, "r1"), "previous_response_id")
    assert modes == ["hinted"]
    hints = store.store.blocks.hints(own)
    assert hints and lineage_of(store, "s0") in hints  # hints there, s0's lineage among them
    assert_plain_404(lambda: store.get(A, "r1"))
    assert_whole(store, A, s0, ["s0-in"])


def test_a_write_refused_for_memory_evicts_only_what_it_needs_least_recently_used_first():
    """On a full Redis (noeviction, maxmemory just above what it holds), a write about twice one stored
    response's size is refused for memory; Maya evicts its own least recently used entries and retries. It must
    evict a few (what the write needs, with the margin Redis's noise asks), never the most one EVICT may take
    (64), and the ones gone are exactly the least recently used (the oldest, but the ones read since). Catches
    mutants that drop EVICT's `want` test or evict from the wrong end.

    The store has read and deleted before Redis fills, as any running store has: on a Redis that never ran a
    delete, the first one grows its used_memory by ~130 kB for good (Redis 7.0), which the second EVICT round
    reads as memory still missing and pays for with ~6 more responses (14 evicted here, not 3)."""
    redis = RedisServer()
    store = own_redis_store(redis)
    try:
        words = "w" * 10_000  # ~20 kB a response: well above Redis's noise (tens of kB, see test_redis_integrity)
        ids = [single(store, A, f"r{n}", words)["id"] for n in range(40)]
        for rid in ids[:5]:  # read since: now the most recently used
            store.get(A, rid)
        order = ids[5:] + ids[:5]  # least recently used first
        single(store, A, "warm", words)
        store.delete(A, "warm")  # Redis's first read and first delete each grow its used_memory by ~100 kB once
        store.stats()  # the probe's first step: the rare scripts loaded while there is room
        command(redis.url, "CONFIG", "SET", "maxmemory", used_memory(redis.url) + 20_000)
        evictions = store.stats()["evictions"]
        bigger = "b" * 20_000
        store.put(A, response("big", answer("big-out", bigger)), [item("big-in", bigger)])
        evicted = store.stats()["evictions"] - evictions
        gone = [rid for rid in ids if not command(redis.url, "EXISTS", key(store, "e", rid))]
        assert gone == order[:evicted]  # the least recently used, in order
        assert 1 <= evicted <= 8, f"{evicted} responses evicted for one write of about two responses' size"
        assert store.get(A, "big")["id"] == "big"
    finally:
        store.close()
        redis.stop()


def test_a_recount_drops_an_entry_whose_envelope_block_is_gone(store):
    """An entry with its own envelope (its instructions differ), the envelope's block gone (one DEL), then a
    recount with no read before it: RECOUNT must find the entry broken and remove it (and count it), leaving the
    others. Catches the mutant that skips RECOUNT's envelope check (the entry would stay, counted, unreadable)."""
    url = shared_redis().url
    kept = [single(store, A, f"r{n}") for n in range(3)]
    odd = {**response("odd", answer("odd-out")), "instructions": "Be brief."}
    store.put(A, odd, [item("odd-in")])
    envelope = command(url, "HGET", key(store, "e", "odd"), "env").decode()
    assert envelope == digest(pack_envelope(odd))
    assert command(url, "DEL", key(store, "b", scope(store, A), envelope)) == 1
    entries, lost = store.stats()["entries"], store.stats()["lost"]
    store.recount()
    assert command(url, "EXISTS", key(store, "e", "odd")) == 0
    assert store.stats()["entries"] == entries - 1 == 3
    assert store.stats()["lost"] == lost + 1
    assert_plain_404(lambda: store.get(A, "odd"))
    for stored in kept:
        assert_whole(store, A, stored, [f"{stored['id']}-in"])
