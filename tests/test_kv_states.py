"""The saved-KV-state cache on its own: lookup, planning, LRU order, bounds and counters."""

from __future__ import annotations

import random

import pytest

from maya_server.engine.kv_states import MIN_GAIN_TOKENS, KvStateCache, pack, shared_prefix_length

KEY_BYTES = 4  # each token of a key is accounted as a 32-bit int


def ids(start: int, count: int) -> list[int]:
    return list(range(start, start + count))


def naive_shared(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def test_shared_prefix_length_agrees_with_a_plain_loop():
    rng = random.Random(7)
    for _ in range(500):
        a = [rng.randrange(4) for _ in range(rng.randrange(0, 40))]
        b = a[: rng.randrange(0, len(a) + 1)] + [rng.randrange(4) for _ in range(rng.randrange(0, 10))]
        assert shared_prefix_length(pack(a), pack(b)) == naive_shared(a, b)
    assert shared_prefix_length(pack([1, 2, 256]), pack([1, 2, 1])) == 2  # whole tokens, not bytes


def test_plan_restores_the_entry_sharing_the_longest_prefix():
    cache = KvStateCache(8, 10**6)
    a, b = ids(0, 100), ids(1000, 100)
    cache.put(a, "A", 10)
    cache.put(b, "B", 10)
    cache.put(ids(0, 40), "A-short", 10)  # a prefix of A: A already holds it
    plan = cache.plan(live=b, prompt=a + [7, 8, 9])
    assert plan.restore is not None and plan.restore.state == "A"
    assert plan.reuse == 100
    assert not plan.save_live  # the live tokens are saved as B already


def test_plan_never_reuses_the_prompts_last_token():
    cache = KvStateCache(8, 10**6)
    a = ids(0, 100)
    cache.put(a, "A", 10)
    assert cache.plan(live=[], prompt=a).reuse == 99
    assert cache.plan(live=a, prompt=a).reuse == 99
    assert cache.plan(live=a, prompt=a[:50]).reuse == 49


def test_plan_keeps_the_live_kv_unless_a_restore_gains_enough():
    cache = KvStateCache(8, 10**6)
    a = ids(0, 100)
    cache.put(a, "A", 10)
    prompt = a + [1]
    close_enough = a[: 100 - MIN_GAIN_TOKENS + 1]
    plan = cache.plan(live=close_enough, prompt=prompt)
    assert plan.restore is None and plan.reuse == len(close_enough)
    plan = cache.plan(live=a[: 100 - MIN_GAIN_TOKENS], prompt=prompt)
    assert plan.restore is not None and plan.reuse == 100


def test_plan_saves_the_live_kv_only_when_a_worthwhile_part_would_be_lost():
    cache = KvStateCache(8, 10**6)
    live = ids(0, 100)
    assert not cache.plan(live=live, prompt=live + [5]).save_live  # a continuation keeps it all
    assert not cache.plan(live=live, prompt=live[: 100 - MIN_GAIN_TOKENS + 1] + [5]).save_live
    assert cache.plan(live=live, prompt=live[: 100 - MIN_GAIN_TOKENS] + [5]).save_live
    assert cache.plan(live=live, prompt=ids(500, 10)).save_live  # another conversation
    cache.put(live + [1, 2], "longer", 10)
    assert not cache.plan(live=live, prompt=ids(500, 10)).save_live  # already held by an entry


def test_a_disabled_cache_plans_live_reuse_only_and_stores_nothing():
    for cache in (KvStateCache(0, 10**6), KvStateCache(8, 0)):
        assert not cache.enabled
        assert not cache.put(ids(0, 10), "A", 1)
        plan = cache.plan(live=ids(0, 50), prompt=ids(0, 20) + [999] * 30)
        assert plan.reuse == 20 and plan.restore is None and not plan.save_live
        assert cache.snapshot().entries == 0


def test_least_recently_used_entry_goes_first_when_the_count_is_full():
    cache = KvStateCache(2, 10**6)
    cache.put(ids(0, 20), "A", 10)
    cache.put(ids(100, 20), "B", 10)
    cache.restored(cache.plan(live=[], prompt=ids(0, 20) + [1]).restore, 0.001)  # A is now the most recent
    cache.put(ids(200, 20), "C", 10)
    assert _restorable(cache, ids(0, 20)) == "A"
    assert _restorable(cache, ids(100, 20)) is None
    assert _restorable(cache, ids(200, 20)) == "C"
    stats = cache.snapshot()
    assert (stats.entries, stats.evictions, stats.hits) == (2, 1, 1)


def test_byte_bound_evicts_as_many_as_needed_and_accounts_keys():
    size = lambda tokens, state: state + KEY_BYTES * tokens  # noqa: E731
    cache = KvStateCache(8, size(20, 100) * 3)
    for start in (0, 100, 200):
        assert cache.put(ids(start, 20), start, 100)
    assert cache.snapshot().bytes == size(20, 100) * 3
    assert cache.put(ids(300, 20), 300, 250)  # needs the room of two
    stats = cache.snapshot()
    assert (stats.entries, stats.evictions, stats.bytes) == (2, 2, size(20, 100) + size(20, 250))
    assert _restorable(cache, ids(200, 20)) == 200 and _restorable(cache, ids(0, 20)) is None


def test_an_entry_larger_than_the_budget_is_not_stored_and_evicts_nothing():
    cache = KvStateCache(8, 1000)
    cache.put(ids(0, 20), "A", 100)
    assert not cache.fits(1001)
    assert not cache.put(ids(100, 20), "huge", 1000)  # with its key it exceeds the budget
    stats = cache.snapshot()
    assert (stats.entries, stats.rejected, stats.evictions) == (1, 1, 0)
    cache.reject()
    assert cache.snapshot().rejected == 2


def test_a_newer_state_supersedes_the_ones_it_extends():
    cache = KvStateCache(8, 10**6)
    cache.put(ids(0, 20), "turn 1", 10)
    cache.put(ids(0, 10) + [99] * 20, "a branch", 10)
    cache.put(ids(0, 40), "turn 2", 10)
    stats = cache.snapshot()
    assert (stats.entries, stats.superseded, stats.evictions) == (2, 1, 0)
    assert _restorable(cache, ids(0, 20)) == "turn 2"
    assert _restorable(cache, ids(0, 10) + [99] * 20) == "a branch"


def test_counters_and_discard():
    cache = KvStateCache(8, 10**6)
    cache.put(ids(0, 20), "A", 10, seconds=0.25)
    entry = cache.plan(live=[], prompt=ids(0, 20) + [1]).restore
    cache.restored(entry, 0.5)
    cache.kept_live(MIN_GAIN_TOKENS)
    cache.kept_live(MIN_GAIN_TOKENS - 1)
    cache.kept_live(0)
    cache.discard(entry)
    stats = cache.snapshot()
    assert (stats.saves, stats.hits, stats.live_reuses, stats.misses) == (1, 1, 1, 2)
    assert (stats.entries, stats.bytes) == (0, 0)
    assert stats.save_seconds == pytest.approx(0.25) and stats.restore_seconds == pytest.approx(0.5)


def _restorable(cache: KvStateCache, tokens: list[int]):
    """The state a cold context would restore for a prompt continuing `tokens`, or None."""
    plan = cache.plan(live=[], prompt=tokens + [123456])
    return plan.restore.state if plan.restore is not None and plan.reuse >= len(tokens) else None
