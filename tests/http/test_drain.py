"""`drain.py` on its own: every consumer iterates to the end and closes its events, however it stopped."""

from __future__ import annotations

import asyncio

import pytest

from maya_server.http.drain import stream_frames
from maya_server.pipeline.drain import drain


def source(log: list, count: int = 3, *, cleanup_s: float = 0.0):
    """Events 0..count-1, recording in `log` what it yielded and when its cleanup ran."""

    async def events():
        try:
            for n in range(count):
                log.append(n)
                yield n
                await asyncio.sleep(0)
        finally:
            log.append("cleanup started")
            await asyncio.sleep(cleanup_s)
            log.append("closed")

    return events()


def test_drain_delivers_every_event_then_closes():
    log: list = []
    delivered: list = []
    asyncio.run(drain(source(log), delivered.append))
    assert delivered == [0, 1, 2] and log[-1] == "closed"


def test_drain_closes_its_events_when_delivery_fails():
    log: list = []

    def deliver(event: int) -> None:
        if event == 1:
            raise ValueError("too large to keep")

    with pytest.raises(ValueError):
        asyncio.run(drain(source(log, 10), deliver))
    assert log == [0, 1, "cleanup started", "closed"]


def closing_cancelled_midway(close_fully: bool) -> list:
    """Delivery fails at event 1, so the drain closes its events; a cancel lands during their cleanup."""

    def deliver(event: int) -> None:
        if event == 1:
            raise ValueError("too large to keep")

    async def scenario():
        log: list = []
        task = asyncio.ensure_future(drain(source(log, 10, cleanup_s=0.05), deliver, close_fully=close_fully))
        await asyncio.sleep(0.01)
        assert log[-1] == "cleanup started"
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return log

    return asyncio.run(scenario())


def test_a_fully_closing_drain_finishes_the_cleanup_though_cancelled_during_it():
    assert closing_cancelled_midway(close_fully=True)[-2:] == ["cleanup started", "closed"]
    assert closing_cancelled_midway(close_fully=False)[-1] == "cleanup started"  # cut short without it


def test_a_stream_sends_the_opening_every_events_frames_then_the_closing():
    async def scenario():
        frames = stream_frames(source([]), lambda n: [f"{n}".encode()] * 2,
                               opening=lambda: [b"open"], closing=lambda: [b"done"])
        return [frame async for frame in frames]

    assert asyncio.run(scenario()) == [b"open", b"0", b"0", b"1", b"1", b"2", b"2", b"done"]


def test_a_stream_left_early_closes_its_events_and_sends_no_closing():
    async def scenario():
        log: list = []
        frames = stream_frames(source(log, 100), lambda n: [b"x"], opening=lambda: [], closing=lambda: [b"done"])
        sent = [await frames.__anext__(), await frames.__anext__()]
        await frames.aclose()
        return sent, log

    sent, log = asyncio.run(scenario())
    assert sent == [b"x", b"x"] and log == [0, 1, "cleanup started", "closed"]


def test_a_streams_opening_is_made_when_the_stream_starts():
    made: list = []
    frames = stream_frames(source([]), lambda n: [], opening=lambda: made.append("opening") or [], closing=list)
    assert made == []

    async def scenario():
        return [frame async for frame in frames]

    asyncio.run(scenario())
    assert made == ["opening"]
