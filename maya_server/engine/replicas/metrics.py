"""`maya:upstream_*` and `maya:replica_*` metrics of a replica set, read at scrape time.

The single upstream's metrics (`upstream/health.py`'s `UpstreamCollector`), each labelled by its replica's URL (without
credentials), plus what routing did: requests routed by replica and reason, Maya's streams on each replica, and
the affinity table's size against its bound, evictions, lookups and lookups that found a prefix; with the
affinity shared by several Maya replicas (`shared_affinity.py`), its lookups, hits, errors and writes.
"""

from __future__ import annotations

from typing import Counter, Iterator, Protocol, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..upstream.health import OUTCOMES
from .prefix_affinity import PrefixTable
from .replica import Replica
from .router import Reason
from .shared_affinity import SharedAffinity, SharedFigures


class ReplicaSetFigures(Protocol):
    """What the collector reads of the replica set it is handed (`ReplicaSetEngine` is one): it never imports
    the set, so the set can import its collector without a circle."""

    replicas: Sequence[Replica]
    routes: Counter[tuple[int, Reason]]
    table: PrefixTable
    shared: SharedAffinity | None


class ReplicaCollector:
    def __init__(self, engine: ReplicaSetFigures) -> None:
        self._engine = engine

    def collect(self) -> Iterator[Metric]:
        yield from self._replicas()
        yield from self._table()
        shared = getattr(self._engine, "shared", None)  # None: each Maya routes on its own table
        if shared is not None:
            yield from self._shared(shared.figures)

    def _replicas(self) -> Iterator[Metric]:
        engine = self._engine
        up = GaugeMetricFamily("maya:upstream_up", "1 while the replica is in (its last check succeeded)",
                               labels=["url"])
        failures = GaugeMetricFamily("maya:upstream_consecutive_failures", "Failures since the replica's last success",
                                     labels=["url"])
        slots = GaugeMetricFamily("maya:upstream_slots", "Sequences the replica takes at once", labels=["url"])
        in_flight = GaugeMetricFamily("maya:upstream_in_flight", "Maya's streams on the replica now", labels=["url"])
        requests = CounterMetricFamily("maya:upstream_requests", "Requests sent to the replica, by outcome",
                                       labels=["url", "outcome"])
        routes = CounterMetricFamily("maya:replica_routes", "Requests routed to the replica, by why it was chosen",
                                     labels=["url", "reason"])
        for index, replica in enumerate(engine.replicas):
            url, health = replica.url, replica.engine.health
            up.add_metric([url], 1.0 if replica.up else 0.0)
            failures.add_metric([url], health.consecutive_failures)
            slots.add_metric([url], replica.engine.slots)
            in_flight.add_metric([url], replica.in_flight)
            for outcome in OUTCOMES:
                requests.add_metric([url, outcome], health.outcomes[outcome])
            for reason in Reason:
                routes.add_metric([url, reason.value], engine.routes[(index, reason)])
        yield from (up, failures, slots, in_flight, requests, routes)

    def _table(self) -> Iterator[Metric]:
        table = self._engine.table
        yield GaugeMetricFamily("maya:replica_affinity_entries", "Prefix blocks the affinity table holds",
                                value=len(table))
        yield GaugeMetricFamily("maya:replica_affinity_limit", "Prefix blocks the affinity table may hold "
                                "(replica_affinity_entries)", value=table.limit)
        yield CounterMetricFamily("maya:replica_affinity_evictions", "Prefix blocks dropped to stay in bound",
                                  value=table.evictions)
        yield CounterMetricFamily("maya:replica_affinity_lookups", "Prompts looked up in the affinity table",
                                  value=table.lookups)
        yield CounterMetricFamily("maya:replica_affinity_hits", "Lookups in which a replica held part of the prompt",
                                  value=table.hits)

    @staticmethod
    def _shared(f: SharedFigures) -> Iterator[Metric]:
        counters = (("lookups", "Prompts looked up in the affinity the Maya replicas share (Redis)", f.lookups),
                    ("hits", "Shared lookups that found a deeper prefix another Maya routed", f.hits),
                    ("errors", "Shared lookups and writes that failed or timed out (local routing instead)", f.errors),
                    ("skipped", "Shared lookups not made while paused after a failure", f.skipped),
                    ("records", "Prompt tips written to the shared affinity", f.records),
                    ("dropped", "Prompt tips not written (too many waiting, or the write failed)", f.dropped))
        for name, text, value in counters:
            yield CounterMetricFamily(f"maya:replica_affinity_shared_{name}", text, value=value)
