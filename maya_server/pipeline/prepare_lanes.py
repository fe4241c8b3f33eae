"""Where prompts are prepared (rendered, tokenized, checked) off the event loop: two bounded lanes of threads.

Why: preparing a prompt blocks. The embedded engine's tokenizer waits on
llama-server's `/tokenize` for every run it has not cached, and a large body's
render copies megabytes. In the default thread pool (six threads on two cores)
six huge prompts took every thread and a two-character request waited 30 s
behind them. Here a request whose body is small (under `OFF_LOOP_BYTES`,
`http/body.py`) is prepared in the small lane and a large one in the large lane,
each `threads` threads of its own: however many huge prompts are in flight, a
small one waits only for other small ones (`bench/huge_prompts.py` measures it).

Bounded: each lane runs `threads` preparations at once, and the large lane lets
at most `max_waiting` more wait for a thread; past that a large request is a 429
(retry shortly), since each one waiting holds its whole body in memory. A small
request always waits its turn: it costs little to hold. A request whose client
leaves while it waits is dropped from the queue without running.
`PrepareLanesCollector` serves each lane's busy and waiting counts and the
refusals as `maya:prepare_lane_*`.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..errors import RateLimitError

T = TypeVar("T")


@dataclass
class _Lane:
    executor: ThreadPoolExecutor
    threads: int
    admitted: int = 0
    """Preparations in the lane: running (at most `threads`) and waiting for a thread."""
    refused: int = 0

    @property
    def busy(self) -> int:
        return min(self.admitted, self.threads)

    @property
    def waiting(self) -> int:
        return max(0, self.admitted - self.threads)


class PrepareLanes:
    """The small and the large lane. Used from the event loop only (admission counts need no lock)."""

    def __init__(self, threads: int, max_waiting: int) -> None:
        self.max_waiting = max_waiting
        self.lanes = {name: _Lane(ThreadPoolExecutor(threads, thread_name_prefix=f"maya-prepare-{name}"), threads)
                      for name in ("small", "large")}

    async def run(self, large: bool, work: Callable[[], T]) -> T:
        """`work()` in its lane's thread, once one is free; a 429 when the large lane's queue is full."""
        lane = self.lanes["large" if large else "small"]
        if large and lane.waiting >= self.max_waiting and lane.admitted >= lane.threads:
            lane.refused += 1
            raise RateLimitError(
                f"Too many large requests are being prepared at once ({lane.admitted}); retry shortly.",
                code="prepare_queue_full",
            )
        lane.admitted += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(lane.executor, work)
        finally:
            lane.admitted -= 1

    def close(self) -> None:
        """Stop the lanes' threads once what they run now is done; what waits is dropped."""
        for lane in self.lanes.values():
            lane.executor.shutdown(wait=False, cancel_futures=True)

    def __repr__(self) -> str:
        return "PrepareLanes(" + ", ".join(f"{name}: {lane.busy} busy, {lane.waiting} waiting"
                                           for name, lane in self.lanes.items()) + ")"


class PrepareLanesCollector:
    """`maya:prepare_lane_busy`, `_waiting` (by lane) and `_rejections` (the large lane's 429s)."""

    def __init__(self, lanes: PrepareLanes) -> None:
        self._lanes = lanes

    def collect(self) -> Iterator[Metric]:
        busy = GaugeMetricFamily("maya:prepare_lane_busy", "Prompts being prepared, by lane", labels=["lane"])
        waiting = GaugeMetricFamily("maya:prepare_lane_waiting", "Prompts waiting for a preparation thread, by lane",
                                    labels=["lane"])
        for name, lane in self._lanes.lanes.items():
            busy.add_metric([name], lane.busy)
            waiting.add_metric([name], lane.waiting)
        yield busy
        yield waiting
        yield CounterMetricFamily("maya:prepare_lane_rejections", "Large requests refused because the large lane's "
                                  "queue was full (429)", value=self._lanes.lanes["large"].refused)
