"""The replica set's metrics, read at scrape time: one `url`-labelled series per replica for the upstream
families (up, failure streak, slots, in-flight, requests by every outcome), routes by every reason (zeros
included), and the affinity table's size, bound and counters. Fakes stand in for the replicas, so only the
collector's mapping is under test."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from maya_server.engine.replicas.prefix_affinity import PrefixTable
from maya_server.engine.replicas.metrics import ReplicaCollector
from maya_server.engine.replicas.router import Reason
from maya_server.engine.upstream.health import OUTCOMES, UpstreamHealth


def _replica(url, *, up, slots, in_flight, outcomes):
    health = UpstreamHealth(url, clock=lambda: 0.0)
    for outcome in outcomes:
        health.record(outcome, "x" if outcome == "failed" else None)
    engine = SimpleNamespace(health=health, slots=slots)
    return SimpleNamespace(url=health.url, up=up, in_flight=in_flight, engine=engine)


def _engine():
    table = PrefixTable(64)
    table.evictions, table.lookups, table.hits = 3, 10, 7
    replicas = [
        _replica("http://a:1", up=True, slots=2, in_flight=1, outcomes=["ok", "ok", "rejected"]),
        _replica("http://b:2", up=False, slots=4, in_flight=0, outcomes=["ok", "failed", "failed"]),
    ]
    routes = Counter({(0, Reason.AFFINITY): 5, (1, Reason.LEAST_LOADED): 2, (0, Reason.RETRY): 1})
    return SimpleNamespace(replicas=replicas, routes=routes, table=table)


def _samples(engine):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in ReplicaCollector(engine).collect() for s in family.samples}


def test_each_replica_has_its_own_upstream_series_labelled_by_url():
    samples = _samples(_engine())
    for name, a, b in [("maya:upstream_up", 1.0, 0.0), ("maya:upstream_consecutive_failures", 0, 2),
                       ("maya:upstream_slots", 2, 4), ("maya:upstream_in_flight", 1, 0)]:
        assert samples[(name, (("url", "http://a:1"),))] == a
        assert samples[(name, (("url", "http://b:2"),))] == b


def test_requests_are_counted_by_replica_and_every_outcome():
    samples = _samples(_engine())
    requests = {(labels[1][1], labels[0][1]): value for (name, labels), value in samples.items()
                if name == "maya:upstream_requests_total"}
    assert len(requests) == 2 * len(OUTCOMES)
    assert requests[("http://a:1", "ok")] == 2 and requests[("http://a:1", "rejected")] == 1
    assert requests[("http://b:2", "failed")] == 2 and requests[("http://b:2", "cancelled")] == 0


def test_routes_are_counted_by_replica_and_every_reason_zeros_included():
    samples = _samples(_engine())
    routes = {(dict(labels)["url"], dict(labels)["reason"]): value for (name, labels), value in samples.items()
              if name == "maya:replica_routes_total"}
    assert len(routes) == 2 * len(Reason)
    assert routes[("http://a:1", "affinity")] == 5 and routes[("http://a:1", "retry")] == 1
    assert routes[("http://b:2", "least_loaded")] == 2 and routes[("http://b:2", "affinity")] == 0


def test_the_affinity_table_reports_its_size_bound_and_counters():
    samples = _samples(_engine())
    assert samples[("maya:replica_affinity_entries", ())] == 0
    assert samples[("maya:replica_affinity_limit", ())] == 64
    assert samples[("maya:replica_affinity_evictions_total", ())] == 3
    assert samples[("maya:replica_affinity_lookups_total", ())] == 10
    assert samples[("maya:replica_affinity_hits_total", ())] == 7
