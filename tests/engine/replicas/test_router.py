"""Routing over replicas: affinity against load, round-robin, replicas that are out, retries."""

from __future__ import annotations

import pytest

from maya_server.engine.replicas.router import Reason, ReplicaLoad, ReplicaRouter


def loads(*in_flight: int, slots: int = 2, up=None, routed=None) -> list[ReplicaLoad]:
    up = up or [True] * len(in_flight)
    routed = routed or [0] * len(in_flight)
    return [ReplicaLoad(u, n, slots, r) for u, n, r in zip(up, in_flight, routed)]


def test_the_holder_of_the_longest_prefix_takes_it_though_busier():
    router = ReplicaRouter("affinity")
    assert router.route(loads(1, 0), [9, 4]) == (0, Reason.AFFINITY)
    assert router.route(loads(0, 1), [4, 9]) == (1, Reason.AFFINITY)
    assert router.route(loads(2, 2), [9, 0]) == (0, Reason.AFFINITY)  # every replica full: it waits where it is


def test_a_full_holder_gives_way_to_a_replica_with_a_free_slot():
    router = ReplicaRouter("affinity")
    assert router.route(loads(2, 1), [9, 4]) == (1, Reason.OVERFLOW)
    assert router.route(loads(2, 0, 2), [9, 0, 0]) == (1, Reason.OVERFLOW)


def test_new_conversations_spread_over_equally_loaded_replicas():
    router = ReplicaRouter("affinity")
    assert router.route(loads(0, 0), [0, 0]) == (0, Reason.LEAST_LOADED)
    assert router.route(loads(1, 0), [0, 0]) == (1, Reason.LEAST_LOADED)
    assert router.route(loads(1, 1), [4, 4]) == (0, Reason.AFFINITY)  # a turn sent to both: either holds it
    assert router.route(loads(0, 0, routed=[5, 3]), [0, 0]) == (1, Reason.LEAST_LOADED)  # fewest so far


def test_a_replica_that_is_out_is_passed_over_unless_all_are():
    router = ReplicaRouter("affinity")
    assert router.route(loads(0, 1, up=[False, True]), [9, 0]) == (1, Reason.LEAST_LOADED)
    assert router.route(loads(0, 1, up=[False, False]), [9, 0]) == (0, Reason.AFFINITY)


def test_a_retry_goes_to_a_replica_not_yet_tried_and_ends_when_none_is_left():
    router = ReplicaRouter("affinity")
    assert router.route(loads(0, 5, 0), [9, 0, 0], frozenset({0})) == (2, Reason.RETRY)
    assert router.route(loads(0, 0), [9, 0], frozenset({0, 1})) is None


def test_round_robin_takes_turns_and_skips_replicas_that_are_out():
    router = ReplicaRouter("round-robin")
    picks = [router.route(loads(0, 0, 0), [9, 0, 0])[0] for _ in range(4)]
    assert picks == [0, 1, 2, 0]
    assert router.route(loads(0, 0, 0, up=[True, False, True]), [0, 0, 0]) == (2, Reason.ROUND_ROBIN)


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError):
        ReplicaRouter("random")
