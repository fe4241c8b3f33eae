"""The upstream's health record and its metrics: a URL is shown without what may carry a secret, a failure
streak counts up and a success resets it, a refusal still means the upstream is up, and the Prometheus
families read the record at scrape time (labelled by outcome, every outcome present even at zero)."""

from __future__ import annotations

import pytest

from maya_server.engine.upstream.health import OUTCOMES, UpstreamCollector, UpstreamHealth, public_url


@pytest.mark.parametrize("url, shown", [
    ("http://user:secret@host:8080/v1/?key=abc#frag", "http://host:8080/v1"),
    ("https://example.com", "https://example.com"),
    ("http://[::1]:9000/", "http://[::1]:9000"),
    ("http://token@127.0.0.1/api", "http://127.0.0.1/api"),
])
def test_public_url_drops_user_info_query_fragment_and_trailing_slash(url, shown):
    assert public_url(url) == shown


def test_a_new_record_has_seen_nothing_and_holds_no_credential():
    health = UpstreamHealth("http://u:p@host:1/?t=1")
    assert health.describe() == {
        "url": "http://host:1", "healthy": None, "last_checked": None, "consecutive_failures": 0,
        "last_error": None, "requests": {outcome: 0 for outcome in OUTCOMES},
    }


def test_failures_count_up_and_a_success_resets_the_streak_but_keeps_the_last_error():
    times = iter([1.0, 2.0, 3.0, 4.0])
    health = UpstreamHealth("http://h", clock=lambda: next(times))
    health.record("failed", "connection refused")
    health.record("failed", "timed out")
    assert health.consecutive_failures == 2 and health.last_ok is False and health.last_error == "timed out"
    assert health.last_checked == 2.0
    health.record("ok")
    assert health.consecutive_failures == 0 and health.last_ok is True and health.last_checked == 3.0
    assert health.last_error == "timed out"
    assert health.describe()["requests"] == {"ok": 1, "rejected": 0, "failed": 2, "cancelled": 0, "abandoned": 0}


@pytest.mark.parametrize("outcome", ["ok", "rejected", "cancelled"])
def test_every_outcome_but_failed_counts_the_upstream_as_up(outcome):
    health = UpstreamHealth("http://h", clock=lambda: 0.0)
    health.record("failed", "boom")
    health.record(outcome)
    assert health.last_ok is True and health.consecutive_failures == 0


@pytest.mark.parametrize("before", ["ok", "failed"])
def test_an_abandoned_request_is_counted_but_says_nothing_of_the_upstream(before):
    """A client left before the upstream sent a byte: no evidence that it is up (a wedged one looked healthy when
    such requests counted as `cancelled`), none that it is down."""
    health = UpstreamHealth("http://h", clock=lambda: 0.0)
    health.record(before, "boom")
    health.record("abandoned")
    assert health.last_ok is (before == "ok") and health.outcomes["abandoned"] == 1


def _samples(collector):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in collector.collect() for s in family.samples}


def test_the_collector_reads_the_record_at_scrape_time():
    health = UpstreamHealth("http://u:p@h:5/", clock=lambda: 0.0)
    collector = UpstreamCollector(health, slots=4)
    assert _samples(collector)[("maya:upstream_up", (("url", "http://h:5"),))] == 0.0
    health.record("ok")
    health.record("failed", "x")
    health.record("failed", "y")
    samples = _samples(collector)
    assert samples[("maya:upstream_up", (("url", "http://h:5"),))] == 0.0
    assert samples[("maya:upstream_consecutive_failures", ())] == 2
    assert samples[("maya:upstream_slots", ())] == 4
    requests = {dict(labels)["outcome"]: value for (name, labels), value in samples.items()
                if name == "maya:upstream_requests_total"}
    assert requests == {"ok": 1, "rejected": 0, "failed": 2, "cancelled": 0, "abandoned": 0}
    health.record("ok")
    assert _samples(collector)[("maya:upstream_up", (("url", "http://h:5"),))] == 1.0
