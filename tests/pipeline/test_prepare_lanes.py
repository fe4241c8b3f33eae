"""`PrepareLanes`: small requests are prepared in threads of their own, and the large lane's queue is bounded.

The work is held on events, so what runs where and when is decided by the test, not by timing.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from maya_server.errors import RateLimitError
from maya_server.pipeline.prepare_lanes import PrepareLanes, PrepareLanesCollector


def samples(lanes: PrepareLanes) -> dict[tuple[str, str], float]:
    return {(s.name, s.labels.get("lane", "")): s.value
            for family in PrepareLanesCollector(lanes).collect() for s in family.samples}


def test_a_small_prompt_is_prepared_while_every_large_thread_is_held():
    lanes = PrepareLanes(threads=2, max_waiting=4)
    release = threading.Event()

    async def scenario() -> str:
        large = [asyncio.ensure_future(lanes.run(True, release.wait)) for _ in range(6)]
        await asyncio.sleep(0.05)
        assert samples(lanes)[("maya:prepare_lane_busy", "large")] == 2
        assert samples(lanes)[("maya:prepare_lane_waiting", "large")] == 4
        small = await asyncio.wait_for(lanes.run(False, lambda: threading.current_thread().name), timeout=30)
        assert not any(task.done() for task in large)  # the large ones are all still held
        release.set()
        await asyncio.gather(*large)
        return small

    try:
        assert asyncio.run(scenario()).startswith("maya-prepare-small")
    finally:
        release.set()
        lanes.close()


def test_a_large_request_past_the_lanes_queue_is_a_429():
    lanes = PrepareLanes(threads=1, max_waiting=1)
    release = threading.Event()

    async def scenario() -> None:
        held = [asyncio.ensure_future(lanes.run(True, release.wait)) for _ in range(2)]  # one runs, one waits
        await asyncio.sleep(0.05)
        with pytest.raises(RateLimitError) as refused:
            await lanes.run(True, lambda: None)
        assert refused.value.status == 429 and refused.value.code == "prepare_queue_full"
        assert refused.value.headers() == {"Retry-After": "1"}
        assert samples(lanes)[("maya:prepare_lane_rejections_total", "")] == 1
        release.set()
        await asyncio.gather(*held)
        await lanes.run(True, lambda: None)  # room again once they are done

    try:
        asyncio.run(scenario())
    finally:
        release.set()
        lanes.close()


def test_a_request_whose_client_left_while_waiting_never_runs():
    lanes = PrepareLanes(threads=1, max_waiting=4)
    release, ran = threading.Event(), []

    async def scenario() -> None:
        first = asyncio.ensure_future(lanes.run(True, release.wait))
        await asyncio.sleep(0.05)
        second = asyncio.ensure_future(lanes.run(True, lambda: ran.append(True)))
        await asyncio.sleep(0.05)
        second.cancel()
        await asyncio.sleep(0.05)
        assert lanes.lanes["large"].admitted == 1  # the cancelled one left the count
        release.set()
        await first

    try:
        asyncio.run(scenario())
    finally:
        release.set()
        lanes.close()
    assert ran == []
