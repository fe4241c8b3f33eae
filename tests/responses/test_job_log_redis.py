"""A background task's log on a real Redis (`job_log_redis.py`, `jobs_redis_lua.py`), below HTTP: the log numbers
events as it appends them, keeps its count and byte bounds, gives a reader that fell behind an error with a
number of its own (that other readers skip), and refuses every write of a fence that moved on."""

from __future__ import annotations

import asyncio
import functools

import orjson
import pytest
from redis.asyncio import Redis

from maya_server.config import ServerConfig
from maya_server.errors import EventTooLarge
from maya_server.responses import jobs_redis_lua as lua
from maya_server.responses.job_log_redis import JobLogs, RedisJobLog, RedisLogReader, unnumbered
from maya_server.responses.jobs_redis import SCRIPTS
from maya_server.responses.settings import ResponsesSettings
from maya_server.responses.store_open import open_store

from tests.responses.store_backends import shared_redis, unique_prefix


def on_a_loop(test):
    """Run the coroutine test on a fresh event loop (pytest calls a plain function)."""
    @functools.wraps(test)
    def run() -> None:
        asyncio.run(test())

    return run


def delta(n: int) -> dict:
    return {"type": "response.output_text.delta", "sequence_number": 999, "delta": f"word{n} "}


async def open_logs(*, max_count: int = 4096, max_bytes: int = 1 << 20) -> JobLogs:
    config = ServerConfig(engine="scripted", store=shared_redis().url, store_prefix=unique_prefix())
    link = open_store(config, ResponsesSettings()).link
    scripts = {name: link.script(getattr(lua, name)) for name in SCRIPTS}
    return JobLogs(link, Redis.from_url(config.store), scripts, max_count=max_count, max_bytes=max_bytes, block_ms=200)


async def admit(logs: JobLogs, job_id: str) -> RedisJobLog:
    """A record with its two queued events (0 and 1), held by the fence the script gives."""
    now = 1000.0
    args = [logs.link.prefix, now, 900, 16, 4, logs.max_count, logs.max_bytes, job_id, "owner", "replica", now + 60,
            b"[]", b"{}", *unnumbered({"type": "response.created"}), *unnumbered({"type": "response.queued"})]
    answer = await logs.scripts["ADMIT"](args)
    writer = RedisJobLog(logs, job_id, dict, lease_s=60, clock=lambda: now, on_cancel=lambda: None,
                         on_fenced=lambda: None)
    writer.fence = int(answer[1])
    return writer


async def collect(events) -> list[dict]:
    return [orjson.loads(event.json) async for event in events]


async def wait_flushed(writer: RedisJobLog) -> None:
    for _ in range(500):
        if not writer.bytes and writer._state is None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the writer never flushed")


async def close(logs: JobLogs) -> None:
    await logs.tail_client.aclose()
    await logs.link.close()


@on_a_loop
async def test_events_are_numbered_by_the_log_and_a_reader_gets_them_all_then_the_end():
    logs = await open_logs()
    writer = await admit(logs, "resp_a")
    for n in range(5):
        writer.append(delta(n))
    writer.mark("completed")
    writer.close()
    await writer.drained()
    events = await collect(RedisLogReader(logs, "resp_a", 0, 0).follow(-1))
    assert [event["sequence_number"] for event in events] == list(range(7))
    assert [event["type"] for event in events[:2]] == ["response.created", "response.queued"]
    assert events[2] == {"sequence_number": 2, "type": "response.output_text.delta", "delta": "word0 "}
    assert await collect(RedisLogReader(logs, "resp_a", 0, 0).follow(4)) == events[5:]
    await close(logs)


@on_a_loop
async def test_a_reader_that_fell_behind_gets_an_error_with_a_reserved_number_that_others_skip():
    logs = await open_logs(max_count=4)
    writer = await admit(logs, "resp_b")
    for n in range(6):
        writer.append(delta(n))
    await wait_flushed(writer)  # 8 events numbered 0..7; the log keeps 4..7
    lagging = await collect(RedisLogReader(logs, "resp_b", 0, 0).follow(1))
    assert len(lagging) == 1 and lagging[0]["type"] == "error" and lagging[0]["code"] == "stream_cursor_expired"
    assert lagging[0]["sequence_number"] == 8  # after every number the log had given
    writer.append(delta(6))
    writer.mark("completed")
    writer.close()
    await writer.drained()
    current = await collect(RedisLogReader(logs, "resp_b", 0, 0).follow(7))
    assert [event["sequence_number"] for event in current] == [9]  # 8 is the other reader's, never an event
    await close(logs)


@on_a_loop
async def test_the_byte_bound_drops_the_oldest_events_and_an_event_over_it_is_refused():
    logs = await open_logs(max_bytes=4096)
    writer = await admit(logs, "resp_c")
    with pytest.raises(EventTooLarge):
        writer.append({"type": "response.output_text.delta", "delta": "x" * 5000})
    for n in range(100):
        writer.append(delta(n))
    await wait_flushed(writer)
    first, held = await logs.link.command(
        lambda: logs.link.client.hmget(logs.key("j:", "resp_c"), "first", "eb"))
    entries = await logs.link.command(lambda: logs.link.client.xrange(logs.key("js:", "resp_c")))
    assert int(held) <= 4096 and int(held) == sum(len(fields[b"j"]) for _, fields in entries)
    assert int(first) == int(entries[0][0].split(b"-")[0]) - 1 > 0
    await close(logs)


@on_a_loop
async def test_a_write_with_a_fence_that_moved_on_is_refused_and_changes_nothing():
    logs = await open_logs()
    fenced: list[bool] = []
    writer = await admit(logs, "resp_d")
    writer._on_fenced = lambda: fenced.append(True)
    writer.fence += 1000  # as after another replica failed the task
    writer.append(delta(0))
    writer.mark("in_progress")
    assert not await writer.confirmed()
    assert fenced == [True] and writer.fenced
    state, following = await logs.link.command(
        lambda: logs.link.client.hmget(logs.key("j:", "resp_d"), "s", "n"))
    assert state == b"queued" and int(following) == 2
    await close(logs)
