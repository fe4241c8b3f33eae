"""First-come-first-served admission in front of an engine.

The embedded engine runs one sequence at a time; engines that batch get N
slots. Waiters are served strictly in arrival order, the queue is bounded
(`max_queue`, full → 429), and a waiter that gives up (client gone) leaves the
queue without taking a slot.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from contextlib import asynccontextmanager
from typing import AsyncIterator, Callable

from ..errors import RateLimitError


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

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one engine slot for the body of the `async with`."""
        started = time.perf_counter()
        await self._acquire()
        if self._on_wait is not None:
            self._on_wait(time.perf_counter() - started)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self) -> None:
        if self._busy < self.slots and not self._waiters:
            self._busy += 1
            self.admitted += 1
            return
        if len(self._waiters) >= self.max_queue:
            self.rejected += 1
            if self._on_reject is not None:
                self._on_reject()
            raise RateLimitError(
                f"the engine queue is full ({self.max_queue} waiting); retry later", code="queue_full"
            )
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._release()  # the slot was handed to us just as we gave up: pass it on
            else:
                self._waiters.remove(waiter)
            raise
        self.admitted += 1

    def _release(self) -> None:
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
