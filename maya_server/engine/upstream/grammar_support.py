"""Whether an upstream holds generations to the grammars Maya sends, as its answers show.

Every engine Maya drives takes a GBNF grammar in its own field (`wire.GRAMMAR_MECHANISMS`). One that refuses it
(a 400 where the same request without it is taken: an engine too old for the field, a grammar it cannot read)
never fails the request: it is sent again without the grammar, and the answer is validated before it is published
as always. The first refusal is one warning in the log; after `STOP_AFTER` refusals in a row with none taken in
between, the grammar is no longer sent (each refusal costs a request), and `/v1/status` says so.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable

from prometheus_client.core import CounterMetricFamily

from .wire import GRAMMAR_MECHANISMS, UpstreamKind

log = logging.getLogger("maya.engine")

STOP_AFTER = 3
"""Refusals in a row after which an upstream is sent no more grammars."""
REFUSAL_CHARS = 200
"""Characters of an engine's refusal kept for the log and `/v1/status` (its first line)."""


class GrammarSupport:
    def __init__(self, kind: UpstreamKind, url: str) -> None:
        self.kind = kind
        self.url = url
        """The upstream's address as the metrics and logs show it (no credentials)."""
        self.mechanism = GRAMMAR_MECHANISMS.get(kind)
        """The body field the grammar goes in; None: this kind of upstream has none."""
        self.refusals = 0
        self._in_a_row = 0
        self.last_refusal: str | None = None

    @property
    def usable(self) -> bool:
        return self.mechanism is not None and self._in_a_row < STOP_AFTER

    def taken(self) -> None:
        self._in_a_row = 0

    def refused(self, message: str) -> None:
        """The upstream refused a request for its grammar alone (it took the same request without it)."""
        message = message.splitlines()[0][:REFUSAL_CHARS] if message else "no reason given"
        if self.refusals == 0:
            log.warning("the %s upstream refused a grammar (%s): structured output from it is validated only, "
                        "not held to the schema while it is written", self.kind, message)
        self.refusals += 1
        self._in_a_row += 1
        self.last_refusal = message
        if self._in_a_row == STOP_AFTER:
            log.warning("the %s upstream refused %d grammars in a row: none is sent to it any more", self.kind,
                        STOP_AFTER)

    def describe(self) -> dict:
        if self.mechanism is None:
            return {"mechanism": None, "why_not": f"a {self.kind} upstream has no field Maya knows for a grammar"}
        return {"mechanism": f"{self.kind} {self.mechanism} (GBNF)", "in_use": self.usable,
                "refusals": self.refusals, "last_refusal": self.last_refusal}


class GrammarRefusalsCollector:
    """`maya:upstream_grammar_refusals_total` per upstream, read at scrape time."""

    def __init__(self, supports: Callable[[], Iterable[GrammarSupport]]) -> None:
        self._supports = supports

    def collect(self):
        family = CounterMetricFamily("maya:upstream_grammar_refusals",
                                     "Requests an upstream refused for their grammar alone (sent again without it)",
                                     labels=["url"])
        for support in self._supports():
            family.add_metric([support.url], support.refusals)
        yield family
