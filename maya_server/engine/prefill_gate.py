"""At most N requests in an engine's prompt processing at once; the others wait their turn in Maya.

What it buys: llama-server takes every prompt it is sent into the same batches,
and on a CPU prompts evaluated together take about as long as one after
another, so each waits for all of them. Maya sends the prompts it admits at
once (its requests carry token ids, so nothing staggers them as tokenizing does
for llama-server's own API). In the agent trace (`bench/agent_trace.py`, 4
slots, llama-server's own log), three prompts of 33-41 new tokens sent together
each had their first token 5.0-7.3 s after they were sent; processed in turn,
each took 1.4-2.0 s. `bench/prefill_burst.py` (four new 300-token prompts at
once on 4 slots): the mean time to first token in turn is 0.67-0.83 of
together's, and the last request's about the same.

What it costs, and why it is off by default: a request is held until the
prompt before it has its first token, so a short prompt behind a long one
waits for all of it (together, llama-server would have taken both into one
batch), and each hand-over costs a first token's trip through Maya and the
engine's next step. On the agent trace the continuations' median time to first
token, in turn ÷ together, could not be told apart from this machine's noise
over two interleaved rounds (0.895 and 1.175 of llama-server alone in turn,
0.873 and 0.918 together). GPU engines share the work of prompts batched
together, so for them it is a loss.

A request takes its turn once it holds an engine slot, just before it is sent,
and gives it up at its first token, its end, or its failure. Waiters are served
in arrival order (`fifo.EngineQueue`). A limit of 0 (the default) sends every
prompt at once.
"""

from __future__ import annotations

from typing import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .fifo import Admission, EngineQueue


class PrefillGate:
    def __init__(self, limit: int) -> None:
        """`limit` requests in prompt processing at once (0: no limit). Only requests holding an engine slot
        enter, so the line needs no bound of its own: admission's is it."""
        self.limit = limit
        self._queue = EngineQueue(limit, max_queue=0, on_wait=self._waited) if limit else None
        self.wait_seconds = 0.0
        """Time requests waited for their turn, in all (`maya:engine_prefill_wait_seconds_total`)."""

    def enter(self) -> Admission | None:
        """A place in line for the prompt about to be sent (None when there is no limit); `wait()` on it, then
        `release()` it once the prompt is processed (or the request is over)."""
        return self._queue.admit(bounded=False) if self._queue is not None else None

    def _waited(self, seconds: float) -> None:
        self.wait_seconds += seconds

    @property
    def active(self) -> int:
        return self._queue.busy if self._queue is not None else 0

    @property
    def waiting(self) -> int:
        return self._queue.waiting if self._queue is not None else 0


class PrefillGateCollector:
    """`maya:engine_prefill_*`: the gate's limit, its turns taken and waited for, read at scrape time; one
    sample per gate, labelled with its replica's URL where there are several. `gates` gives the engine's gates
    by URL as they are now (a setting replaces a gate before serving)."""

    def __init__(self, gates: Callable[[], dict[str, PrefillGate]]) -> None:
        self._gates = gates

    def collect(self) -> Iterator[Metric]:
        gates = self._gates()
        labels = ["url"] if len(gates) > 1 else []
        limit = GaugeMetricFamily("maya:engine_prefill_limit",
                                  "Requests the engine processes prompts for at once (0: no limit)", labels=labels)
        active = GaugeMetricFamily("maya:engine_prefill_active", "Requests in prompt processing now", labels=labels)
        waiting = GaugeMetricFamily("maya:engine_prefill_waiting",
                                    "Requests holding a slot that wait for their prompt's turn", labels=labels)
        waited = CounterMetricFamily("maya:engine_prefill_wait_seconds",
                                     "Time requests waited for their prompt's turn", labels=labels)
        for url, gate in gates.items():
            values = [url] if labels else []
            limit.add_metric(values, gate.limit)
            active.add_metric(values, gate.active)
            waiting.add_metric(values, gate.waiting)
            waited.add_metric(values, gate.wait_seconds)
        yield from (limit, active, waiting, waited)
