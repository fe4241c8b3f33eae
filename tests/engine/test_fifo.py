"""The FIFO in front of the engine: order, bounds, and waiters that give up."""

from __future__ import annotations

import asyncio

import pytest

from maya_server.engine.fifo import EngineQueue
from maya_server.errors import RateLimitError


def test_waiters_are_served_in_arrival_order():
    async def scenario():
        queue = EngineQueue(slots=1, max_queue=10)
        order: list[int] = []

        async def worker(n: int) -> None:
            async with queue.slot():
                order.append(n)
                await asyncio.sleep(0.01)

        await asyncio.gather(*(worker(n) for n in range(5)))
        return order, queue

    order, queue = asyncio.run(scenario())
    assert order == [0, 1, 2, 3, 4]
    assert queue.busy == 0 and queue.waiting == 0


def test_a_full_queue_rejects_with_429():
    async def scenario():
        queue = EngineQueue(slots=1, max_queue=1)
        hold = asyncio.Event()

        async def holder():
            async with queue.slot():
                await hold.wait()

        first = asyncio.create_task(holder())
        await asyncio.sleep(0)
        second = asyncio.create_task(holder())
        await asyncio.sleep(0)
        with pytest.raises(RateLimitError):
            async with queue.slot():
                pass
        hold.set()
        await asyncio.gather(first, second)
        return queue

    queue = asyncio.run(scenario())
    assert queue.rejected == 1 and queue.busy == 0


def test_a_cancelled_waiter_leaves_without_taking_the_slot():
    async def scenario():
        queue = EngineQueue(slots=1, max_queue=5)
        release = asyncio.Event()
        served: list[str] = []

        async def user(name: str, wait: asyncio.Event | None = None):
            async with queue.slot():
                served.append(name)
                if wait:
                    await wait.wait()

        first = asyncio.create_task(user("first", release))
        await asyncio.sleep(0)
        quitter = asyncio.create_task(user("quitter"))
        last = asyncio.create_task(user("last"))
        await asyncio.sleep(0)
        quitter.cancel()
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(first, last, return_exceptions=True)
        return served, queue

    served, queue = asyncio.run(scenario())
    assert served == ["first", "last"]
    assert queue.busy == 0 and queue.waiting == 0


def test_several_slots_run_together():
    async def scenario():
        queue = EngineQueue(slots=3, max_queue=5)
        peak = 0

        async def user():
            nonlocal peak
            async with queue.slot():
                peak = max(peak, queue.busy)
                await asyncio.sleep(0.01)

        await asyncio.gather(*(user() for _ in range(6)))
        return peak

    assert asyncio.run(scenario()) == 3
