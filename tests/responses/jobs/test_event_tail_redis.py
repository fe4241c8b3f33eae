"""Packed log entries and the shared tail on a real Redis (`event_tail_redis.py`, `event_log_redis.py`,
`redis_lua.py`), below HTTP: a flush is one Stream entry holding a range of numbers; a reader resuming
inside an entry gets exactly the events after its cursor; trimming drops numbers one by one (an entry goes once
all of its are dropped) and a reader below the oldest kept number gets its terminal error; the readers of one
task on one replica share one `XREAD` loop and each gets every event once, in order.

Every wait is bounded (`within`, from `test_event_log_redis.py`)."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from maya_server.config import ServerConfig
from maya_server.responses.jobs.event_log_redis import JobLogs, RedisLogReader
from maya_server.responses.jobs.redis import job_scripts
from maya_server.responses.settings import ResponsesSettings
from maya_server.responses.store.opening import open_store

from tests.redis_server import RedisServer
from tests.responses.store_backends import unique_prefix
from tests.responses.jobs.test_event_log_redis import (
    admit, close, collect, delta, drained, on_a_loop, open_logs, wait_flushed, within,
)


async def entries(logs: JobLogs, job_id: str) -> list:
    return await logs.link.command(lambda: logs.link.client.xrange(logs.key("js:", job_id)))


async def record(logs: JobLogs, job_id: str) -> tuple[int, int, int]:
    """(first, n, eb) of the task's record."""
    got = await logs.link.command(lambda: logs.link.client.hmget(logs.key("j:", job_id), "first", "n", "eb"))
    return tuple(int(value) for value in got)


async def finished(logs: JobLogs, job_id: str, words: int):
    """A task with its two queued events (0, 1), then `words` deltas flushed at once (one entry), then the end."""
    writer = await admit(logs, job_id)
    for n in range(words):
        writer.append(delta(n))
    writer.mark("completed")
    writer.close()
    await drained(writer)
    return writer


@on_a_loop
async def test_a_flush_is_one_entry_and_a_reader_resuming_inside_it_gets_exactly_the_events_after_its_cursor():
    logs = await open_logs()
    await finished(logs, "resp_p", 10)  # numbers 0..11
    held = await entries(logs, "resp_p")
    assert len(held) == 3  # the queued events, the flush of ten, the end
    assert held[1][0] == b"12-0" and held[1][1][b"a"] == b"2"  # the flush holds numbers 2..11
    whole = await collect(RedisLogReader(logs, "resp_p", 0, 12).follow(-1))
    assert [event["sequence_number"] for event in whole] == list(range(12))
    for cursor in (2, 6, 10):  # inside the packed entry
        resumed = await collect(RedisLogReader(logs, "resp_p", 0, 12).follow(cursor))
        assert resumed == whole[cursor + 1:]
    assert await collect(RedisLogReader(logs, "resp_p", 0, 12).follow(11)) == []  # its last number: only the end
    reader = RedisLogReader(logs, "resp_p", 0, 12)
    following = reader.follow(4)
    for number in range(5, 12):  # `cursor` is the last number delivered, one by one, not the entry's last
        event = await within(anext(following), "the reader got too few events")
        assert reader.cursor == number and event.json.startswith(b'{"sequence_number":%d,' % number)
    await following.aclose()
    await close(logs)


@on_a_loop
async def test_trimming_drops_numbers_inside_an_entry_and_the_entry_goes_once_all_of_its_are_dropped():
    logs = await open_logs(max_count=4)
    writer = await admit(logs, "resp_q")
    for n in range(6):
        writer.append(delta(n))
    await wait_flushed(writer)  # numbers 0..7 in two entries (0..1, 2..7); the log keeps the last 4
    first, following, held_bytes = await record(logs, "resp_q")
    assert (first, following) == (4, 8)
    held = await entries(logs, "resp_q")
    assert [entry_id for entry_id, _ in held] == [b"8-0"]  # 0..1 went; 2..7 stays, 2 and 3 dropped inside it
    kept = await collect_until(RedisLogReader(logs, "resp_q", 0, 8).follow(3), 4)
    assert [event["sequence_number"] for event in kept] == [4, 5, 6, 7]
    assert held_bytes == sum(len(event.json) for event in await raw(logs, "resp_q", 3, 4))
    lagging = await collect(RedisLogReader(logs, "resp_q", 0, 8).follow(2))  # 3 is in Redis, but dropped
    assert [(event["type"], event["code"]) for event in lagging] == [("error", "stream_cursor_expired")]
    assert lagging[0]["sequence_number"] == 8
    for n in range(6, 10):  # four more numbers in one entry: 2..7 and the placeholder 8 are wholly dropped now
        writer.append(delta(n))
    writer.mark("completed")
    writer.close()
    await drained(writer)
    first, following, _ = await record(logs, "resp_q")
    assert (first, following) == (9, 13)  # 8 is the lagging reader's error, never an event
    assert [entry_id for entry_id, _ in await entries(logs, "resp_q")] == [b"13-0", b"13-1"]  # 9..12, the end
    tail = await collect(RedisLogReader(logs, "resp_q", 0, 13).follow(8))
    assert [event["sequence_number"] for event in tail] == [9, 10, 11, 12]
    await close(logs)


@on_a_loop
async def test_the_byte_bound_counts_each_event_of_an_entry():
    logs = await open_logs(max_bytes=1000)
    writer = await admit(logs, "resp_r")
    for n in range(40):  # one entry of 40 events, ~80 bytes each: most of it is dropped at once
        writer.append(delta(n))
    await wait_flushed(writer)
    first, following, held_bytes = await record(logs, "resp_r")
    retained = await raw(logs, "resp_r", first - 1, following - first)
    assert [event.sequence for event in retained] == list(range(first, following))
    assert held_bytes == sum(len(event.json) for event in retained) <= 1000
    assert held_bytes + len((await raw(logs, "resp_r", first - 2, 1))[0].json) > 1000  # no more was dropped
    await close(logs)


@on_a_loop
async def test_a_reader_that_fell_behind_its_replicas_shared_tail_still_gets_its_terminal_error():
    logs = await open_logs(max_count=6)
    writer = await admit(logs, "resp_s")
    fast, slow = RedisLogReader(logs, "resp_s", 0, 2).follow(-1), RedisLogReader(logs, "resp_s", 0, 2).follow(-1)
    fast_seen = [await within(anext(fast), "the fast reader got no event") for _ in range(2)]
    slow_seen = [await within(anext(slow), "the slow reader got no event") for _ in range(2)]
    assert len(logs.tails) == 1  # one tail for both
    for n in range(20):  # the slow reader stops reading meanwhile
        writer.append(delta(n))
        fast_seen.append(await within(anext(fast), "the fast reader got no event"))
    await wait_flushed(writer)
    slow_seen += [event async for event in slow]  # its next number (2) is long dropped
    assert [event.type for event in slow_seen] == ["response.created", "response.queued", "error"]
    assert b'"stream_cursor_expired"' in slow_seen[-1].json and b'"sequence_number":22' in slow_seen[-1].json
    writer.append(delta(20))
    writer.mark("completed")
    writer.close()
    fast_seen += [event async for event in fast]
    numbers = [int(event.json.split(b":", 1)[1].split(b",", 1)[0]) for event in fast_seen]
    assert numbers == list(range(22)) + [23]  # 22 is the slow reader's error: the fast one never sees it
    assert logs.tails == {}
    await close(logs)


@on_a_loop
async def test_readers_of_one_task_on_one_replica_share_one_read_and_each_gets_every_event_once_in_order():
    redis = RedisServer()  # its own server: its command counts are this test's alone
    try:
        config = ServerConfig(engine="scripted", store=redis.url, store_prefix=unique_prefix())
        link = open_store(config, ResponsesSettings()).link
        logs = JobLogs(link, Redis.from_url(config.store), job_scripts(link), max_count=4096, max_bytes=1 << 20,
                       block_ms=10_000)  # no read ends empty within the test: each one returns entries
        writer = await admit(logs, "resp_t")
        readers = [asyncio.ensure_future(collect(RedisLogReader(logs, "resp_t", 0, 2).follow(-1))) for _ in range(3)]
        for _ in range(500):  # until all three have started following
            if sum(tail.readers for tail in logs.tails.values()) == 3:
                break
            await asyncio.sleep(0.01)
        assert len(logs.tails) == 1 and next(iter(logs.tails.values())).readers == 3
        before = await xreads(logs)
        for n in range(12):
            writer.append(delta(n))
            await asyncio.sleep(0.06)  # past the flush interval: about one entry each
        held = logs.tail_figures()
        assert held["tails"] == 1 and held["tail_bytes"] == next(iter(logs.tails.values())).bytes > 0
        writer.mark("completed")
        writer.close()
        await drained(writer)
        seen = await within(asyncio.gather(*readers), "the readers did not reach the end")
        for events in seen:
            assert [event["sequence_number"] for event in events] == list(range(14))
        assert [event["delta"] for event in seen[0][2:]] == [f"word{n} " for n in range(12)]
        entries_written = len(await entries(logs, "resp_t"))  # the flushes and the end
        assert await xreads(logs) - before <= entries_written  # one read per entry at most, not one per reader
        assert logs.tails == {} and logs.tail_figures() == {"tails": 0, "tail_bytes": 0}
        await close(logs)
    finally:
        redis.stop()


@on_a_loop
async def test_a_reader_older_than_the_tail_catches_up_from_redis_then_joins_it():
    logs = await open_logs()
    writer = await admit(logs, "resp_u")
    for n in range(10):
        writer.append(delta(n))
    await wait_flushed(writer)  # numbers 0..11
    ahead = RedisLogReader(logs, "resp_u", 0, 12).follow(8)  # the tail starts after 8
    assert b'"sequence_number":9' in (await within(anext(ahead), "no event after 8")).json
    behind = RedisLogReader(logs, "resp_u", 0, 12).follow(0)  # older than anything the tail holds
    assert b'"sequence_number":1' in (await within(anext(behind), "no event after 0")).json
    assert len(logs.tails) == 1
    for n in range(10, 13):  # what comes now, the reader behind gets from the tail once it caught up
        writer.append(delta(n))
    writer.mark("completed")
    writer.close()
    await drained(writer)
    old = await collect(behind)
    assert [event["sequence_number"] for event in old] == list(range(2, 15))
    assert [event["sequence_number"] for event in await collect(ahead)] == list(range(10, 15))
    await close(logs)


# -- helpers ------------------------------------------------------------------------------
async def collect_until(events, count: int) -> list[dict]:
    """The first `count` events a reader yields (the log has not ended)."""
    import orjson

    got = [orjson.loads((await within(anext(events), "the reader got too few events")).json) for _ in range(count)]
    await events.aclose()
    return got


class Raw:
    def __init__(self, sequence: int, json: bytes) -> None:
        self.sequence, self.json = sequence, json


async def raw(logs: JobLogs, job_id: str, after: int, count: int) -> list[Raw]:
    """`count` numbered events after `after` as the stream holds them, below the log's `first` or not."""
    from maya_server.responses.jobs.event_tail_redis import decode

    numbered, _ = decode(await entries(logs, job_id))
    return [Raw(sequence, event.json) for sequence, event in numbered if after < sequence <= after + count]



async def xreads(logs: JobLogs) -> int:
    stats = await logs.link.command(lambda: logs.link.client.info("commandstats"))
    return stats.get("cmdstat_xread", {}).get("calls", 0)


def test_an_entry_written_before_packing_reads_as_its_one_event():
    from maya_server.responses.jobs.event_tail_redis import decode

    old = (b"4-0", {b"t": b"response.output_text.delta", b"j": b'{"sequence_number":3,"delta":"a"}'})
    numbered, ended = decode([old, (b"4-1", {b"e": b"1"})])
    assert ended and [(sequence, event.json) for sequence, event in numbered] == [(3, old[1][b"j"])]
