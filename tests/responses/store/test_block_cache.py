"""The replica-local block cache alone: its byte bound (encoded lengths, a block larger than the bound never held,
0 holds nothing), CLOCK's second chance, scopes that never share a block, its figures."""

from __future__ import annotations

import orjson

from maya_server.responses.store.block_cache import HINTS, BlockCache


def data(n: int, size: int = 100) -> bytes:
    body = orjson.dumps({"id": f"msg_{n}", "text": ""})
    return orjson.dumps({"id": f"msg_{n}", "text": "x" * (size - len(body))})


def test_the_bytes_held_are_the_encoded_lengths_and_never_pass_the_bound():
    cache = BlockCache(1000)
    for n in range(25):
        cache.add("s", f"d{n}", data(n))
        assert cache.bytes <= 1000
        assert cache.bytes == sum(len(b.data) for b in cache._blocks.values())
    report = cache.report()
    assert report == {"bytes": 1000, "limit_bytes": 1000, "blocks": 10, "hits": 0, "misses": 0, "evictions": 15}


def test_a_block_larger_than_the_bound_is_handed_back_but_not_held():
    cache = BlockCache(150)
    block = cache.add("s", "big", data(1, 200))
    assert block.item() == orjson.loads(data(1, 200))
    assert cache.report()["blocks"] == 0 and cache.bytes == 0
    cache.note("s", "1", "0", 1)
    assert cache.held("s", ["big"]) == {} and cache.hints("s") == []  # no hint for what is not held


def test_zero_holds_nothing():
    cache = BlockCache(0)
    cache.add("s", "d", data(1))
    cache.note("s", "1", "0", 1)
    assert cache.report()["blocks"] == 0 and cache.hints("s") == []


def test_a_block_used_since_the_hand_passed_is_spared_once():
    cache = BlockCache(300)
    for n in range(3):
        cache.add("s", f"d{n}", data(n))
    assert set(cache.held("s", ["d0"])) == {"d0"}  # used: spared by the next eviction
    cache.add("s", "d3", data(3))
    assert set(cache.held("s", ["d0", "d1", "d2", "d3"])) == {"d0", "d2", "d3"}  # d1 went, not d0
    cache.add("s", "d4", data(4))  # every block was just used: the hand clears them all and takes the oldest
    assert len(cache.held("s", ["d0", "d2", "d3", "d4"])) == 3 and cache.report()["evictions"] == 2


def test_scopes_never_share_a_block():
    cache = BlockCache(10_000)
    a = cache.add("scope-a", "same", data(1))
    cache.note("scope-a", "7", "0", 1)
    assert cache.held("scope-b", ["same"]) == {}
    assert cache.hints("scope-b") == []
    b = cache.add("scope-b", "same", data(1))
    assert a is not b and cache.report()["blocks"] == 2
    assert cache.held("scope-a", ["same"])["same"] is a and cache.held("scope-b", ["same"])["same"] is b


def test_adding_a_held_block_again_keeps_the_one_held():
    cache = BlockCache(10_000)
    first = cache.add("s", "d", data(1))
    assert cache.add("s", "d", data(1)) is first and cache.bytes == len(data(1))


def test_a_block_is_decoded_once_and_only_when_asked():
    cache = BlockCache(10_000)
    block = cache.add("s", "d", data(1))
    assert block._item is None
    assert block.item() is block.item() == orjson.loads(data(1))


def test_a_scopes_hints_go_with_its_last_block():
    cache = BlockCache(200)
    cache.add("a", "d1", data(1))
    cache.note("a", "1", "0", 1)
    cache.add("b", "d2", data(2))
    cache.note("b", "2", "3", 1)
    assert cache.hints("a") == ["1", "0", 1]
    cache.add("b", "d3", data(3))  # evicts a's only block
    assert cache.hints("a") == [] and cache.hints("b") == ["2", "3", 1]
    cache.count(hits=5, misses=2)
    assert (cache.report()["hits"], cache.report()["misses"]) == (5, 2)


def test_hints_are_the_most_recent_lineages_of_the_scope_each_once():
    cache = BlockCache(10_000)
    cache.add("s", "d", data(1))
    for lineage in range(HINTS + 3):
        cache.note("s", str(lineage), "0", lineage)
    cache.note("s", "5", "1", 50)  # noted again: its newest generation and length, now the most recent
    hints = cache.hints("s")
    triples = [tuple(hints[at:at + 3]) for at in range(0, len(hints), 3)]
    assert len(triples) == HINTS and triples[-1] == ("5", "1", 50)
    assert [t[0] for t in triples] == [str(n) for n in range(3, HINTS + 3) if n != 5] + ["5"]
