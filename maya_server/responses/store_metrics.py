"""`maya:responses_cache_*`: the response store's figures, read from the store at scrape time.

A collector rather than counters bumped at call sites: the store counts for
itself (pure, tested without HTTP) and the registry only reads `stats()`, so
the two can never drift. Only aggregates: no owner, response id or content.
"""

from __future__ import annotations

from typing import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily

from .store import ResponseStore

GAUGES = {
    "entries": "Stored responses",
    "bytes": "Serialized bytes held: unique item blocks, response JSON and references",
    "assembly_bytes_in_flight": "Expanded snapshot bytes being assembled right now",
}
COUNTERS = {
    "hits": "Lookups that found a live response",
    "misses": "Lookups of unknown, expired, evicted, deleted or other-key ids",
    "writes": "Responses stored",
    "rejections": "Responses refused for their size or for lack of room",
    "evictions": "Responses evicted under capacity pressure (least recently used first)",
    "expirations": "Responses dropped when their TTL passed",
    "deletions": "Responses deleted by their owner",
    "assembly_rejections": "Requests refused with 503 because the assembly budget was exhausted",
}
TIMINGS = {
    "write": ("writes", "write_seconds", "Time spent storing responses"),
    "assembly": ("assemblies", "assembly_seconds", "Time spent pinning histories for continuations"),
}
PREFIX = "maya:responses_cache_"


class StoreCollector:
    def __init__(self, store: ResponseStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        stats = self.store.stats()
        for name, text in GAUGES.items():
            yield GaugeMetricFamily(PREFIX + name, text, value=stats[name])
        yield GaugeMetricFamily(PREFIX + "limit_entries", "Configured response limit", value=stats["limits"]["entries"])
        yield GaugeMetricFamily(PREFIX + "limit_bytes", "Configured byte limit", value=stats["limits"]["bytes"])
        for name, text in COUNTERS.items():
            yield CounterMetricFamily(PREFIX + name, text, value=stats[name])
        for name, (count, total, text) in TIMINGS.items():
            yield SummaryMetricFamily(PREFIX + name + "_seconds", text, count_value=stats[count], sum_value=stats[total])
