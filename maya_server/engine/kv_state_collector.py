"""`maya:kv_states_*`: the embedded engine's saved KV states, read at scrape time.

The engine is built before the app and counts on its own thread, so nothing
is pushed into a registry: each app registers this collector (via the
engine's `metric_collectors()`) and it reads a snapshot when scraped.
"""

from __future__ import annotations

from typing import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from .kv_states import KvStateStats


class KvStateCollector(Collector):
    """`maya:kv_states_*` from an engine's `KvStateStats`."""

    def __init__(self, read: Callable[[], KvStateStats]) -> None:
        self._read = read

    def describe(self) -> list[Metric]:
        return []  # the families depend on the engine: collected, not pre-declared

    def collect(self) -> Iterator[Metric]:
        stats = self._read()
        for name, help_text, value in (
            ("entries", "Saved conversation KV states held", stats.entries),
            ("bytes", "Bytes held by saved KV states", stats.bytes),
            ("max_entries", "Saved KV states allowed (0: off)", stats.max_entries),
            ("max_bytes", "Bytes allowed for saved KV states", stats.max_bytes),
        ):
            yield GaugeMetricFamily(f"maya:kv_states_{name}", help_text, value=value)
        for name, help_text, value in (
            ("hits", "Generations that restored a saved KV state", stats.hits),
            ("live_reuses", "Generations served by the live KV's prefix, nothing restored", stats.live_reuses),
            ("misses", "Generations that found no reusable prefix, live or saved", stats.misses),
            ("saves", "KV states saved", stats.saves),
            ("evictions", "Saved KV states dropped for room, least recently used first", stats.evictions),
            ("superseded", "Saved KV states dropped because a newer one extends them", stats.superseded),
            ("rejected", "KV states not saved because they alone exceed the byte limit", stats.rejected),
        ):
            yield CounterMetricFamily(f"maya:kv_states_{name}", help_text, value=value)
        yield SummaryMetricFamily(
            "maya:kv_states_restore_seconds", "Time spent restoring saved KV states",
            count_value=stats.hits, sum_value=stats.restore_seconds,
        )
        yield SummaryMetricFamily(
            "maya:kv_states_save_seconds", "Time spent saving KV states",
            count_value=stats.saves, sum_value=stats.save_seconds,
        )
