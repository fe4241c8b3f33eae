"""First-come-first-served admission in front of an engine.

The embedded engine runs one sequence at a time; engines that batch get N
slots. Waiters are served strictly in arrival order and the queue is bounded
(`max_queue`). Admission is synchronous and happens before a response starts,
so a full queue is a 429 the client sees as such, never a stream that opens
and then breaks; the wait for the slot comes afterwards. A place that is
given up (client gone, job cancelled) leaves the queue, or passes its slot
on, exactly once.

Admitted background jobs take `admit(bounded=False)`: their own admission
(`JOB_ENTRIES`, workers) already bounds them, and a job once accepted must wait
for the engine rather than fail because foreground traffic filled the queue.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from contextlib import asynccontextmanager
from typing import AsyncIterator, Callable

from ..errors import RateLimitError

RETRY_AFTER_S = 1
"""What a 429 for a full queue tells the client to wait (`Retry-After`)."""


class Admission:
    """One place in the queue: already a slot, or a waiter for one. `release()` is idempotent."""

    def __init__(self, queue: "EngineQueue", waiter: asyncio.Future[None] | None) -> None:
        self._queue = queue
        self._waiter = waiter
        self._admitted_at = time.perf_counter()
        self._released = False

    @property
    def holds_slot(self) -> bool:
        waiter = self._waiter
        return waiter is None or (waiter.done() and not waiter.cancelled())

    async def wait(self) -> None:
        """Until the slot is ours (at once when it already is)."""
        if self._waiter is not None:
            await self._waiter
        self._queue.waited(time.perf_counter() - self._admitted_at)

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        if self.holds_slot:
            self._queue.release_slot()  # ours, or handed to us just as we gave up: pass it on
        else:
            self._queue.leave(self._waiter)

    def __repr__(self) -> str:
        state = "released" if self._released else "holding" if self.holds_slot else "waiting"
        return f"Admission({state})"


class EngineQueue:
    def __init__(
        self,
        slots: int,
        max_queue: int,
        *,
        on_wait: Callable[[float], None] | None = None,
        on_reject: Callable[[], None] | None = None,
    ) -> None:
        self.slots = slots
        self.max_queue = max_queue
        self._busy = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._on_wait = on_wait
        self._on_reject = on_reject
        self.rejected = 0
        self.admitted = 0

    @property
    def busy(self) -> int:
        return self._busy

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def admit(self, *, bounded: bool = True) -> Admission:
        """Take a slot or a place in line now, or raise a 429 when `bounded` and the line is full."""
        if self._busy < self.slots and not self._waiters:
            self._busy += 1
            self.admitted += 1
            return Admission(self, None)
        if bounded and len(self._waiters) >= self.max_queue:
            self.rejected += 1
            if self._on_reject is not None:
                self._on_reject()
            raise RateLimitError(
                f"The engine queue is full ({self.max_queue} waiting); retry after {RETRY_AFTER_S}s.",
                code="queue_full", retry_after=RETRY_AFTER_S,
            )
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self.admitted += 1
        return Admission(self, waiter)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Admit, wait for and hold one engine slot for the body of the `async with`."""
        admission = self.admit()
        try:
            await admission.wait()
            yield
        finally:
            admission.release()

    def waited(self, seconds: float) -> None:
        if self._on_wait is not None:
            self._on_wait(seconds)

    def leave(self, waiter: asyncio.Future[None]) -> None:
        """A waiter gives up before it got the slot. A release may already have popped it (it
        skips cancelled waiters), so it is removed only if still in line."""
        waiter.cancel()
        try:
            self._waiters.remove(waiter)
        except ValueError:
            pass

    def release_slot(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes directly to the next waiter
                return
        self._busy -= 1

    def describe(self) -> dict:
        return {
            "slots": self.slots,
            "busy": self._busy,
            "waiting": len(self._waiters),
            "max_queue": self.max_queue,
            "admitted": self.admitted,
            "rejected": self.rejected,
        }
