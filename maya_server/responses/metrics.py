"""`maya:responses_cache_*` and `maya:responses_jobs_*`, read from the store and the job
manager at scrape time. With Redis, `entries` and `bytes` are the fleet's (as last read by this replica),
the counters this replica's.

Collectors rather than counters bumped at call sites: the store and the jobs
count for themselves (pure, tested without HTTP) and the registry only reads
their `stats()`, so the two can never drift. Only aggregates: no owner,
response id or content.
"""

from __future__ import annotations

from typing import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily

from .jobs.manager import JobManager
from .store.redis_config import KINDS as REDIS_WARNING_KINDS
from .store.interface import ResponseStoreBackend

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
    "lost": "Stored responses found broken (Redis lost one of their keys) and removed (404 stored_response_lost)",
    "recounts": "Times this replica rebuilt the shared store's figures from the entries that exist (Redis store)",
}
TIMINGS = {
    "write": ("writes", "write_seconds", "Time spent storing responses"),
    "assembly": ("assemblies", "assembly_seconds", "Time spent pinning histories for continuations"),
}
PREFIX = "maya:responses_cache_"


class StoreCollector:
    def __init__(self, store: ResponseStoreBackend) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        stats = self.store.stats()
        backend = GaugeMetricFamily(PREFIX + "backend", "The store's backend (1 for the one in use)", labels=["backend"])
        backend.add_metric([stats["backend"]], 1)
        yield backend
        yield GaugeMetricFamily(PREFIX + "healthy", "1 while the store answers (its last command or probe succeeded)",
                                value=int(stats["healthy"]))
        if "commands" in stats:
            yield SummaryMetricFamily(PREFIX + "command_seconds", "Round trips to the shared store (Redis), their time",
                                      count_value=stats["commands"], sum_value=stats["command_seconds"])
            yield CounterMetricFamily(PREFIX + "command_errors", "Store commands that failed to connect or timed out",
                                      value=stats["command_errors"])
        if "redis" in stats:
            yield from _redis_metrics(stats["redis"])
        if "block_cache" in stats:
            yield from _block_cache_metrics(stats["block_cache"])
        for name, text in GAUGES.items():
            yield GaugeMetricFamily(PREFIX + name, text, value=stats[name])
        yield GaugeMetricFamily(PREFIX + "limit_entries", "Configured response limit", value=stats["limits"]["entries"])
        yield GaugeMetricFamily(PREFIX + "limit_bytes", "Configured byte limit", value=stats["limits"]["bytes"])
        for name, text in COUNTERS.items():  # `lost`, `recounts`: only a Redis store has them (memory loses nothing)
            yield CounterMetricFamily(PREFIX + name, text, value=stats.get(name, 0))
        for name, (count, total, text) in TIMINGS.items():
            yield SummaryMetricFamily(PREFIX + name + "_seconds", text, count_value=stats[count], sum_value=stats[total])


def _block_cache_metrics(cache: dict) -> Iterator[Metric]:
    """This replica's copy of stored item blocks (Redis store; `store/block_cache.py`)."""
    name = PREFIX + "block_cache_"
    yield GaugeMetricFamily(name + "bytes", "Encoded bytes of item blocks this replica holds a copy of",
                            value=cache["bytes"])
    yield GaugeMetricFamily(name + "limit_bytes", "The most such bytes held (store_block_cache_bytes)",
                            value=cache["limit_bytes"])
    yield GaugeMetricFamily(name + "blocks", "Item blocks this replica holds a copy of", value=cache["blocks"])
    yield CounterMetricFamily(name + "hits", "Blocks a continuation took from this replica's copy (Redis checked they "
                              "exist)", value=cache["hits"])
    yield CounterMetricFamily(name + "misses", "Blocks a continuation fetched from Redis", value=cache["misses"])
    yield CounterMetricFamily(name + "evictions", "Blocks dropped from the copy to keep it within its bound",
                              value=cache["evictions"])


def _redis_metrics(redis: dict) -> Iterator[Metric]:
    """What Redis's configuration and answers say (`redis_link.py`, `redis_config.py`): one series per warning
    kind (1 while it holds), the standing refusal, the salt changes."""
    warnings = GaugeMetricFamily(PREFIX + "redis_config_warnings", "1 while a warning about Redis's configuration "
                                 "holds (evicting_policy, bytes_over_maxmemory, config_unreadable)", labels=["warning"])
    held = {warning["kind"] for warning in redis["warnings"]}
    for kind in REDIS_WARNING_KINDS:
        warnings.add_metric([kind], int(kind in held))
    yield warnings
    refusing = GaugeMetricFamily(PREFIX + "redis_refusing", "1 while Redis refuses Maya's writes, by its error code",
                                 labels=["reason"])
    if redis["refusal"] is not None:
        refusing.add_metric([redis["refusal"]], 1)
    yield refusing
    yield CounterMetricFamily(PREFIX + "redis_refusals", "Commands Redis refused (NOPERM, MISCONF, BUSY, OOM, ...)",
                              value=redis["refusals"])
    yield CounterMetricFamily(PREFIX + "redis_primary_moves", "Times a Redis node answered as a replica (READONLY, "
                              "MASTERDOWN: a failover) and Maya dropped its connections to it",
                              value=redis["primary_moves"])
    yield CounterMetricFamily(PREFIX + "redis_unreplicated", "Acknowledged writes fewer replicas than "
                              "--store-wait-replicas confirmed in time (each a 503)", value=redis["unreplicated"])
    yield CounterMetricFamily(PREFIX + "salt_changes", "Times this replica adopted a scope salt another replica wrote "
                              "(Redis flushed or restarted empty)", value=redis["salt_changes"])
    yield CounterMetricFamily(PREFIX + "salt_restores", "Times this replica found the scope salt gone from Redis and "
                              "wrote its own back", value=redis["salt_restores"])


JOB_GAUGES = {
    "queued": "Background responses waiting for a worker",
    "running": "Background responses generating",
    "records": "Background job records held (active and retained)",
    "event_bytes": "Bytes of retained background events",
    "readers": "Connected background stream readers",
}
JOB_COUNTERS = {
    "admitted": "Background responses admitted",
    "rejections": "Background responses refused under admission pressure",
    "reader_rejections": "Stream readers refused over the reader limits",
    "cancellations": "Background responses cancelled",
    "timeouts": "Background responses failed at their deadline",
    "evictions": "Finished job records evicted early to admit new ones",
}
JOB_PREFIX = "maya:responses_jobs_"


def _take_over_metrics(stats: dict) -> Iterator[Metric]:
    """Tasks changing hands between replicas (`jobs/handover.py`), as this replica saw them."""
    yield CounterMetricFamily(JOB_PREFIX + "claimed", "Tasks of another replica this replica took over (queued or "
                              "running)", value=stats["claimed"])
    yield CounterMetricFamily(JOB_PREFIX + "resumed", "Running tasks of another replica this replica continued from "
                              "their published output", value=stats["resumed"])
    yield CounterMetricFamily(JOB_PREFIX + "handed_over", "Tasks this replica handed over to the fleet at shutdown",
                              value=stats["handed_over"])
    waited = stats["resume_seconds"]
    yield SummaryMetricFamily(JOB_PREFIX + "resume_seconds", "Seconds from a task being free to take (its lease's "
                              "end, its hand-over) to its start on this replica", count_value=waited["count"],
                              sum_value=waited["sum"])
    unowned = CounterMetricFamily(JOB_PREFIX + "ended_unowned", "Tasks without an owner this replica ended, by the "
                                  "code of their error event", labels=["code"])
    for code, count in sorted(stats["ended_unowned"].items()):
        unowned.add_metric([code], count)
    yield unowned


class JobCollector:
    def __init__(self, jobs: JobManager) -> None:
        self.jobs = jobs

    def collect(self) -> Iterator[Metric]:
        stats = self.jobs.stats()
        for name, text in JOB_GAUGES.items():
            yield GaugeMetricFamily(JOB_PREFIX + name, text, value=stats[name])
        for name, text in JOB_COUNTERS.items():
            yield CounterMetricFamily(JOB_PREFIX + name, text, value=stats[name])
        backend = GaugeMetricFamily(JOB_PREFIX + "backend", "Where background records live (1 for the one in use)",
                                    labels=["backend"])
        backend.add_metric([stats["backend"]], 1)
        yield backend
        if "fenced" in stats:
            yield CounterMetricFamily(JOB_PREFIX + "fenced", "Tasks this replica stopped because another replica "
                                      "failed them after their lease lapsed", value=stats["fenced"])
            yield CounterMetricFamily(JOB_PREFIX + "reaped", "Tasks without an owner this replica ended (failed, or "
                                      "cancelled while between owners)", value=stats["reaped"])
            yield from _take_over_metrics(stats)
            yield GaugeMetricFamily(JOB_PREFIX + "tails", "Background tasks this replica reads one shared tail of "
                                    "(at most the stream reader limit)", value=stats["tails"])
            yield GaugeMetricFamily(JOB_PREFIX + "tail_bytes", "Bytes of events the shared tails hold for their "
                                    "readers (each within the per-task event limits)", value=stats["tail_bytes"])
        finished = CounterMetricFamily(JOB_PREFIX + "finished", "Background responses finished, by state",
                                       labels=["state"])
        for state, count in sorted(stats["finished"].items()):
            finished.add_metric([state], count)
        yield finished
