"""What Maya last saw of its upstream engine, for /v1/status and Prometheus.

Every request is a check: the upstream answered (ok) or could not be reached,
timed out, or broke its stream (failed); so is each liveness check of a replica
(`replica.py`). A refusal of one request (its context
is too small) still counts as the upstream being up. The record holds no
credential: the URL is shown without user info, query or fragment.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

OUTCOMES = ("ok", "rejected", "failed", "cancelled", "abandoned")
"""`cancelled`: the client left mid-answer; `abandoned`: it left before the upstream sent anything back (not even
its answer's head), which says nothing good of the upstream: it does not count as a success."""


def public_url(url: str) -> str:
    """`url` without anything that may carry a secret (user:password@, ?query, #fragment)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


class UpstreamHealth:
    def __init__(self, url: str, *, clock: Callable[[], float] = time.time) -> None:
        self.url = public_url(url)
        self._clock = clock
        self.last_ok: bool | None = None
        self.last_checked: float | None = None
        self.last_error: str | None = None
        self.consecutive_failures = 0
        self.outcomes: Counter[str] = Counter()

    def record(self, outcome: str, error: str | None = None) -> None:
        """One request's outcome (one of OUTCOMES); `error` is our own short description, never upstream text."""
        self.outcomes[outcome] += 1
        if outcome != "abandoned":
            self.checked(outcome != "failed", error)

    def checked(self, ok: bool, error: str | None = None) -> None:
        """The upstream answered (ok) or could not be reached / broke off (not ok)."""
        self.last_checked = self._clock()
        self.last_ok = ok
        if ok:
            self.consecutive_failures = 0
        else:
            self.last_error = error
            self.consecutive_failures += 1

    def describe(self) -> dict:
        return {
            "url": self.url,
            "healthy": self.last_ok,
            "last_checked": self.last_checked,
            "consecutive_failures": self.consecutive_failures,
            "last_error": self.last_error,
            "requests": {outcome: self.outcomes[outcome] for outcome in OUTCOMES},
        }


class UpstreamCollector:
    """`maya:upstream_*` metrics, read from the health record at scrape time."""

    def __init__(self, health: UpstreamHealth, slots: int) -> None:
        self._health = health
        self._slots = slots

    def collect(self) -> Iterator[Metric]:
        health = self._health
        up = GaugeMetricFamily("maya:upstream_up", "1 if the last upstream check succeeded", labels=["url"])
        up.add_metric([health.url], 1.0 if health.last_ok else 0.0)
        yield up
        yield GaugeMetricFamily(
            "maya:upstream_consecutive_failures", "Upstream failures since the last success",
            value=health.consecutive_failures,
        )
        yield GaugeMetricFamily("maya:upstream_slots", "Sequences Maya sends the upstream at once", value=self._slots)
        requests = CounterMetricFamily("maya:upstream_requests", "Requests sent to the upstream, by outcome", labels=["outcome"])
        for outcome in OUTCOMES:
            requests.add_metric([outcome], health.outcomes[outcome])
        yield requests
