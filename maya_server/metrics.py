"""Prometheus metrics, one registry per app (no global state).

Labels carry routes, statuses and finish reasons only: never a credential, a
model input or generated text.
"""

from __future__ import annotations

from typing import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from .engine.kv_states import KvStateStats

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("maya:http_requests", "HTTP requests answered", ["route", "status"], registry=r)
        self.request_seconds = Histogram(
            "maya:http_request_duration_seconds", "Time to the end of the response", ["route"],
            buckets=LATENCY_BUCKETS, registry=r,
        )
        self.prompt_tokens = Counter("maya:prompt_tokens", "Prompt tokens sent to the engine", registry=r)
        self.cached_tokens = Counter("maya:cached_prompt_tokens", "Prompt tokens reused from the KV cache", registry=r)
        self.generated_tokens = Counter("maya:generated_tokens", "Tokens generated", registry=r)
        self.generations = Counter("maya:generations", "Finished generations", ["finish_reason"], registry=r)
        self.first_token_seconds = Histogram(
            "maya:time_to_first_token_seconds", "From admission to the first generated token",
            buckets=LATENCY_BUCKETS, registry=r,
        )
        self.queue_wait_seconds = Histogram(
            "maya:engine_queue_wait_seconds", "Time spent waiting for an engine slot",
            buckets=LATENCY_BUCKETS, registry=r,
        )
        self.queue_waiting = Gauge("maya:engine_queue_waiting", "Requests waiting for an engine slot", registry=r)
        self.slots_busy = Gauge("maya:engine_slots_busy", "Engine slots in use", registry=r)
        self.slots_total = Gauge("maya:engine_slots", "Engine slots", registry=r)
        self.queue_rejections = Counter("maya:engine_queue_rejections", "Requests refused because the queue was full", registry=r)

    def watch_kv_states(self, read: Callable[[], KvStateStats | None]) -> None:
        """Expose an engine's saved-KV-state counters, read at scrape time: the engine is built
        before the app and counts on its own thread, so nothing is pushed into this registry."""
        self.registry.register(KvStateCollector(read))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class KvStateCollector(Collector):
    """`maya:kv_states_*` from an engine's `KvStateStats`; nothing when the engine keeps none."""

    def __init__(self, read: Callable[[], KvStateStats | None]) -> None:
        self._read = read

    def describe(self) -> list[Metric]:
        return []  # the families depend on the engine: collected, not pre-declared

    def collect(self) -> Iterator[Metric]:
        stats = self._read()
        if stats is None:
            return
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
