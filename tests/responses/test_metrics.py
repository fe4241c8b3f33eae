"""The response store's and background jobs' metrics, read from their `stats()` at scrape time: every gauge,
counter, limit and timing summary carries the matching figure, `finished` is labelled by state, nothing is
cached between scrapes, and a real store's and job manager's stats hold every key the collectors read (so the
two cannot drift apart)."""

from __future__ import annotations

from types import SimpleNamespace

from maya_server.responses.metrics import (
    COUNTERS, GAUGES, JOB_COUNTERS, JOB_GAUGES, JobCollector, StoreCollector, TIMINGS,
)
from maya_server.responses.jobs.manager import JobManager
from maya_server.responses.settings import ResponsesSettings
from maya_server.responses.store.memory import MemoryStore


def _samples(collector) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in collector.collect() for s in f.samples}


def _store_stats() -> dict:
    names = [*GAUGES, *COUNTERS, "writes", "write_seconds", "assemblies", "assembly_seconds"]
    stats = {name: float(i + 1) for i, name in enumerate(dict.fromkeys(names))}
    return {**stats, "limits": {"entries": 100, "bytes": 5000}, "backend": "redis", "healthy": False,
            "commands": 12, "command_seconds": 0.5, "command_errors": 3}


def test_the_store_collector_maps_every_figure():
    stats = _store_stats()
    samples = _samples(StoreCollector(SimpleNamespace(stats=lambda: stats)))
    for name in GAUGES:
        assert samples[("maya:responses_cache_" + name, ())] == stats[name]
    for name in COUNTERS:
        assert samples[("maya:responses_cache_" + name + "_total", ())] == stats[name]
    assert samples[("maya:responses_cache_limit_entries", ())] == 100
    assert samples[("maya:responses_cache_limit_bytes", ())] == 5000
    for name, (count, total, _) in TIMINGS.items():
        assert samples[(f"maya:responses_cache_{name}_seconds_count", ())] == stats[count]
        assert samples[(f"maya:responses_cache_{name}_seconds_sum", ())] == stats[total]
    assert samples[("maya:responses_cache_backend", (("backend", "redis"),))] == 1
    assert samples[("maya:responses_cache_healthy", ())] == 0
    assert samples[("maya:responses_cache_command_seconds_count", ())] == 12
    assert samples[("maya:responses_cache_command_seconds_sum", ())] == 0.5
    assert samples[("maya:responses_cache_command_errors_total", ())] == 3


def test_the_store_collector_reads_afresh_at_every_scrape():
    stats = _store_stats()
    collector = StoreCollector(SimpleNamespace(stats=lambda: stats))
    _samples(collector)
    stats["entries"] = 77
    assert _samples(collector)[("maya:responses_cache_entries", ())] == 77


def test_the_job_collector_maps_every_figure_and_labels_finished_by_state():
    stats = {name: i + 1 for i, name in enumerate([*JOB_GAUGES, *JOB_COUNTERS])}
    stats["finished"] = {"failed": 2, "completed": 9}
    stats.update(backend="redis", fenced=3, reaped=4, claimed=5, resumed=6, handed_over=7,
                 resume_seconds={"sum": 2.5, "count": 2}, ended_unowned={"background_owner_lost": 8}, tails=5, tail_bytes=6)
    samples = _samples(JobCollector(SimpleNamespace(stats=lambda: stats)))
    assert samples[("maya:responses_jobs_tails", ())] == 5
    assert samples[("maya:responses_jobs_tail_bytes", ())] == 6
    assert samples[("maya:responses_jobs_backend", (("backend", "redis"),))] == 1
    assert samples[("maya:responses_jobs_fenced_total", ())] == 3
    assert samples[("maya:responses_jobs_reaped_total", ())] == 4
    assert samples[("maya:responses_jobs_claimed_total", ())] == 5
    assert samples[("maya:responses_jobs_resumed_total", ())] == 6
    assert samples[("maya:responses_jobs_handed_over_total", ())] == 7
    assert samples[("maya:responses_jobs_resume_seconds_sum", ())] == 2.5
    assert samples[("maya:responses_jobs_resume_seconds_count", ())] == 2
    assert samples[("maya:responses_jobs_ended_unowned_total", (("code", "background_owner_lost"),))] == 8
    for name in JOB_GAUGES:
        assert samples[("maya:responses_jobs_" + name, ())] == stats[name]
    for name in JOB_COUNTERS:
        assert samples[("maya:responses_jobs_" + name + "_total", ())] == stats[name]
    assert samples[("maya:responses_jobs_finished_total", (("state", "completed"),))] == 9
    assert samples[("maya:responses_jobs_finished_total", (("state", "failed"),))] == 2


def test_real_stats_feed_the_collectors_with_no_identifiers():
    settings = ResponsesSettings(job_workers=1)
    store_samples = _samples(StoreCollector(MemoryStore(settings)))
    assert store_samples[("maya:responses_cache_entries", ())] == 0
    assert store_samples[("maya:responses_cache_limit_entries", ())] == settings.cache_entries
    job_samples = _samples(JobCollector(JobManager(settings)))
    assert job_samples[("maya:responses_jobs_admitted_total", ())] == 0
    assert store_samples[("maya:responses_cache_backend", (("backend", "memory"),))] == 1
    assert all(not labels or labels[0][0] in ("state", "backend") for _, labels in [*store_samples, *job_samples])
