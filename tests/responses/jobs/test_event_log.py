"""The background event log on its own: bounds, cursors, and readers that fall behind."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from maya_server.errors import EventTooLarge
from maya_server.responses.jobs.event_log import EventLog


def event(n: int, size: int = 10) -> dict:
    return {"type": "response.output_text.delta", "sequence_number": n, "delta": "x" * size}


def numbered_log(max_count: int, max_bytes: int) -> EventLog:
    """A log whose owner numbers a reserved event right after the last one, as its assembler would."""
    log = EventLog(max_count, max_bytes, reserve_sequence=lambda: log.last + 1)
    return log


def decode(event) -> dict:
    """What a reader gets is the event's type and JSON (SSE framing is the streaming reader's job)."""
    assert event.type == orjson.loads(event.json)["type"]
    return orjson.loads(event.json)


def test_count_and_byte_bounds_drop_the_oldest():
    log = numbered_log(3, 10_000)
    for n in range(5):
        log.append(event(n))
    assert (log.first_retained, log.last) == (2, 4)
    small = numbered_log(100, 300)
    for n in range(10):
        small.append(event(n, 50))
    assert small.bytes <= 300 and small.last == 9 and small.first_retained > 0


def test_bytes_count_each_event_json_size_and_drop_with_it():
    log = numbered_log(2, 10_000)
    sizes = [len(orjson.dumps(event(n))) for n in range(3)]
    for n in range(3):
        log.append(event(n))
    assert log.bytes == sum(sizes[1:])  # the dropped event's bytes went with it


def test_a_single_event_over_the_byte_limit_is_refused():
    log = numbered_log(10, 200)
    with pytest.raises(EventTooLarge):
        log.append(event(0, 500))
    assert log.last == -1 and log.bytes == 0


def test_cursor_checks():
    log = numbered_log(3, 10_000)
    for n in range(5):
        log.append(event(n))
    assert log.check_cursor(5) == "future"
    assert log.check_cursor(0) == "expired"  # event 1 is gone
    assert log.check_cursor(1) is None and log.check_cursor(4) is None


def test_a_reader_replays_then_follows_until_closed():
    async def scenario():
        log = numbered_log(100, 100_000)
        log.append(event(0))
        received = []

        async def read():
            async for frame in log.follow(-1):
                received.append(decode(frame)["sequence_number"])

        reader = asyncio.ensure_future(read())
        await asyncio.sleep(0)
        for n in range(1, 4):
            log.append(event(n))
            await asyncio.sleep(0)
        log.close()
        await asyncio.wait_for(reader, 1)
        return received

    assert asyncio.run(scenario()) == [0, 1, 2, 3]


def test_a_reader_overtaken_while_connected_gets_a_terminal_error_not_a_gap():
    async def scenario():
        log = numbered_log(4, 100_000)
        for n in range(3):
            log.append(event(n))
        frames = log.follow(-1)
        first = decode(await frames.__anext__())
        for n in range(3, 10):  # the reader is slow: events 1.. are dropped meanwhile
            log.append(event(n))
        rest = [decode(frame) async for frame in frames]
        return first, rest

    first, rest = asyncio.run(scenario())
    assert first["sequence_number"] == 0
    assert len(rest) == 1 and rest[0]["type"] == "error"
    assert rest[0]["code"] == "stream_cursor_expired"
    assert rest[0]["sequence_number"] == 10  # its own number, not that of an event it never delivered


def test_the_overtaken_error_takes_a_number_from_the_tasks_numbering_that_other_readers_skip():
    numbering = iter(range(100))

    def next_number() -> int:
        return next(numbering)

    async def scenario():
        log = EventLog(max_count=4, max_bytes=100_000, reserve_sequence=next_number)

        def publish() -> None:
            n = next_number()
            log.append(event(n))

        for _ in range(3):
            publish()
        slow, fast = log.follow(-1), log.follow(-1)
        await slow.__anext__()
        fast_seen = [decode(await fast.__anext__())["sequence_number"] for _ in range(3)]
        for _ in range(5):  # the slow reader is overtaken; the fast one keeps up
            publish()
            fast_seen.append(decode(await fast.__anext__())["sequence_number"])
        error = decode(await slow.__anext__())
        publish()
        log.close()
        fast_seen += [decode(frame)["sequence_number"] async for frame in fast]
        return error, fast_seen

    error, fast_seen = asyncio.run(scenario())
    assert error["code"] == "stream_cursor_expired"
    assert error["sequence_number"] not in fast_seen
    assert len(set(fast_seen)) == len(fast_seen) and fast_seen == sorted(fast_seen)


def test_a_reader_at_the_end_of_a_closed_log_stops_at_once():
    async def scenario():
        log = numbered_log(10, 10_000)
        log.append(event(0))
        log.close()
        return [frame async for frame in log.follow(0)]

    assert asyncio.run(scenario()) == []


def test_batches_hand_out_what_is_there_together_and_a_reader_behind_gets_its_error_alone():
    async def scenario():
        log = numbered_log(6, 100_000)
        for n in range(3):
            log.append(event(n))
        lists = log.batches(0)
        first = [decode(e)["sequence_number"] for e in await lists.__anext__()]  # all that is there, at once
        log.append(event(3))
        second = [decode(e)["sequence_number"] for e in await lists.__anext__()]
        behind = log.batches(0)
        for n in range(4, 9):  # 0..2 dropped meanwhile: the reader after 0 is overtaken
            log.append(event(n))
        overtaken = [decode(e) for e in await behind.__anext__()]
        log.close()
        rest = [[decode(e)["sequence_number"] for e in batch] async for batch in lists]
        return first, second, overtaken, rest

    first, second, overtaken, rest = asyncio.run(scenario())
    assert (first, second) == ([1, 2], [3])
    assert len(overtaken) == 1 and overtaken[0]["code"] == "stream_cursor_expired"
    assert overtaken[0]["sequence_number"] == 9
    assert rest == [[4, 5, 6, 7, 8]]  # 9 is the other reader's error: skipped
