"""A background task's log on a real Redis (`jobs/event_log_redis.py`, `jobs/redis_lua.py`), below HTTP: the log numbers
events as it appends them, keeps its count and byte bounds, gives a reader that fell behind an error with a
number of its own (that other readers skip), refuses every write of a fence that moved on or after the end, and
a reap with a fence that is not the record's changes nothing.

Every wait here is bounded (`within`): a log that never ends (a flush that died, a number given twice) fails
the test that waits on it, alone, instead of hanging the run."""

from __future__ import annotations

import asyncio
import functools

import orjson
import pytest
from redis.asyncio import Redis

from maya_server.config import ServerConfig
from maya_server.errors import EventTooLarge
from maya_server.responses.jobs.event_log_redis import JobLogs, RedisJobLog, RedisLogReader, unnumbered
from maya_server.responses.jobs.event_tail_redis import decode, sequence_of
from maya_server.responses.jobs.redis import job_scripts
from maya_server.responses.settings import ResponsesSettings
from maya_server.responses.store.opening import open_store

from tests.responses.store_backends import shared_redis, unique_prefix


BOUND_S = 15.0
"""The longest a test waits for a writer or a reader; a healthy log answers in well under a second."""


async def within(awaitable, what: str):
    """`awaitable`'s result, or the test fails saying what never happened."""
    try:
        return await asyncio.wait_for(awaitable, BOUND_S)
    except asyncio.TimeoutError:
        raise AssertionError(f"{what} within {BOUND_S:.0f} s") from None


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
    return JobLogs(link, Redis.from_url(config.store), job_scripts(link), max_count=max_count, max_bytes=max_bytes,
                   block_ms=200)


async def admit(logs: JobLogs, job_id: str) -> RedisJobLog:
    """A record with its two queued events (0 and 1), held by the fence the script gives."""
    now = 1000.0
    args = [logs.link.prefix, now, 900, 16, 4, logs.max_count, logs.max_bytes, job_id, "owner", "replica", now + 60,
            b"[]", b"{}", b"{}", 0, "model", "chatml", now + 600,
            *unnumbered({"type": "response.created"}), *unnumbered({"type": "response.queued"})]
    answer = await logs.scripts["ADMIT"](args)
    writer = RedisJobLog(logs, job_id, dict, lease_s=60, clock=lambda: now, on_cancel=lambda: None,
                         on_fenced=lambda: None)
    writer.fence = int(answer[1])
    return writer


async def collect(events) -> list[dict]:
    """Every event a reader yields until its stream ends (the log's end entry, or its error)."""
    async def read() -> list[dict]:
        return [orjson.loads(event.json) async for event in events]

    return await within(read(), "the reader did not reach the end of the log")


async def drained(writer: RedisJobLog) -> None:
    await within(writer.drained(), "the writer did not close its log in Redis")


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
    await drained(writer)
    events = await collect(RedisLogReader(logs, "resp_a", 0, 0).follow(-1))
    assert [event["sequence_number"] for event in events] == list(range(7))
    assert [event["type"] for event in events[:2]] == ["response.created", "response.queued"]
    assert events[2] == {"sequence_number": 2, "type": "response.output_text.delta", "delta": "word0 "}
    assert await collect(RedisLogReader(logs, "resp_a", 0, 0).follow(4)) == events[5:]
    await close(logs)


@on_a_loop
async def test_the_model_text_kept_with_events_comes_back_to_a_taker_only_and_in_both_flushes():
    logs = await open_logs()
    writer = await admit(logs, "resp_raw")
    kept = {2: [("<tool_call>", True), ("look", False)], 5: [("\n", False)]}
    writer._raw = lambda sequence: kept.get(sequence)  # what `ResponseAssembler.take_raw` hands the log
    for n in range(3):
        writer.append({**delta(n), "sequence_number": n + 2})
    await wait_flushed(writer)
    writer.append({**delta(3), "sequence_number": 5})
    await within(writer.hand_over(), "the writer did not hand the task over")  # the other script that appends
    everything = await logs.everything("resp_raw")
    assert [event.raw for event in everything] == [None, None, [["<tool_call>", True], ["look", False]], None,
                                                   None, [["\n", False]]]
    read = await within(RedisLogReader(logs, "resp_raw", 0, 0).batches(-1).__anext__(), "no batch")
    assert all(event.raw is None for event in read)  # readers never get it, nor the bytes it takes
    assert b"tool_call" not in b"".join(event.json for event in read)
    await close(logs)


def test_a_flush_that_must_stop_short_never_splits_the_events_of_one_piece_of_model_text():
    from collections import deque
    from maya_server.responses.jobs.event_log_redis import BATCH_EVENTS, _batch_count

    pending = deque(("t", b"{}", b"") for _ in range(BATCH_EVENTS + 10))
    assert _batch_count(pending) == BATCH_EVENTS  # no piece begins in reach: the usual bound
    pending[BATCH_EVENTS - 3] = ("t", b"{}", b'[["x",false]]')
    assert _batch_count(pending) == BATCH_EVENTS - 3  # the piece that begins there goes whole in the next
    assert _batch_count(deque(list(pending)[:BATCH_EVENTS])) == BATCH_EVENTS


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
    await drained(writer)
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
    numbered, _ = decode(entries)  # a flush is one entry: the oldest may hold numbers below `first` (dropped)
    retained = [event for sequence, event in numbered if sequence >= int(first)]
    assert int(held) <= 4096 and int(held) == sum(len(event.json) for event in retained)
    assert numbered[0][0] <= int(first) <= sequence_of(entries[0][0]) and int(first) > 0
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
    assert not await within(writer.confirmed(), "the refused write was not confirmed")
    assert fenced == [True] and writer.fenced
    state, following = await logs.link.command(
        lambda: logs.link.client.hmget(logs.key("j:", "resp_d"), "s", "n"))
    assert state == b"queued" and int(following) == 2
    await close(logs)


async def held(logs: JobLogs, job_id: str) -> tuple:
    """All that Redis holds of one task, and the fleet's figures: what a refused script must leave as it was."""
    client = logs.link.client

    async def read() -> tuple:
        return (await client.hgetall(logs.key("j:", job_id)), await client.xrange(logs.key("js:", job_id)),
                await client.zscore(logs.key("jlease", ""), job_id), await client.zscore(logs.key("jfin", ""), job_id),
                await client.hgetall(logs.key("jn", "")))

    return await logs.link.command(read)


def reap_args(logs: JobLogs, job_id: str, fence: int, now: float) -> list:
    """REAP's arguments as another replica sends them for a task whose lease lapsed."""
    failed = {"id": job_id, "object": "response", "status": "failed", "output": []}
    events = [{"type": "error", "code": "background_owner_lost", "message": "gone", "param": None},
              {"type": "response.failed", "response": failed}]
    return [logs.link.prefix, job_id, fence, now, logs.max_count, logs.max_bytes, orjson.dumps(failed), "failed",
            "background_owner_lost", 0, *(part for event in events for part in unnumbered(event))]


@on_a_loop
async def test_a_reap_with_a_fence_that_is_not_the_records_changes_nothing():
    logs = await open_logs()
    writer = await admit(logs, "resp_e")  # its lease runs until 1060
    writer.append(delta(0))
    writer.mark("in_progress")
    assert await within(writer.confirmed(), "the owner's write was not confirmed")
    before = await held(logs, "resp_e")
    long_after_the_lease = 5000.0
    assert await logs.scripts["REAP"](reap_args(logs, "resp_e", writer.fence - 1, long_after_the_lease)) == 0
    assert await held(logs, "resp_e") == before  # state, fence, snapshot, log, lease, figures
    # the record's own fence does fail it: the refusal above was the fence's, not the lease's
    assert await logs.scripts["REAP"](reap_args(logs, "resp_e", writer.fence, long_after_the_lease)) == 1
    record = (await held(logs, "resp_e"))[0]
    assert record[b"s"] == b"failed" and int(record[b"f"]) != writer.fence
    ended = await collect(RedisLogReader(logs, "resp_e", 0, 0).follow(-1))
    assert [event["type"] for event in ended[-2:]] == ["error", "response.failed"]
    await close(logs)


@on_a_loop
async def test_append_run_twice_leaves_the_log_as_once_and_a_retried_end_is_ok():
    """A write retried after a timeout although its first try went through (a Redis stall past the command
    timeout): `APPEND` counts what the owner wrote under its fence, so the second run appends nothing, and a
    retried end answers 'ok' (not 'fenced': the owner ended it itself) with the log ended once."""
    logs = await open_logs()
    writer = await admit(logs, "resp_i")

    def write(written: int, close: int, *events: dict) -> list:
        return [logs.link.prefix, "resp_i", writer.fence, 1000.0, 1060.0, logs.max_count, logs.max_bytes,
                "completed" if close else "", b"{}" if close else b"", close, b"", written,
                *(part for event in events for part in unnumbered(event))]

    for _ in range(2):
        assert await logs.scripts["APPEND"](write(0, 0, delta(0), delta(1))) == [b"ok", 0]
    for _ in range(2):
        assert await logs.scripts["APPEND"](write(2, 1, delta(2))) == [b"ok", 0]
    events = await collect(RedisLogReader(logs, "resp_i", 0, 0).follow(-1))
    assert [event["sequence_number"] for event in events] == [0, 1, 2, 3, 4]
    assert [event.get("delta") for event in events[2:]] == ["word0 ", "word1 ", "word2 "]
    assert (await held(logs, "resp_i"))[0][b"s"] == b"completed"
    assert await logs.scripts["APPEND"](write(3, 0, delta(3))) == [b"fenced", 0]  # nothing after the end
    await close(logs)


@on_a_loop
async def test_a_write_after_the_end_of_the_log_is_refused_and_the_log_stays_as_it_ended():
    logs = await open_logs()
    writer = await admit(logs, "resp_f")
    writer.append(delta(0))
    writer.mark("completed")
    writer.close()
    await drained(writer)
    before = await held(logs, "resp_f")
    late = [logs.link.prefix, "resp_f", writer.fence, 1000.0, 1060.0, logs.max_count, logs.max_bytes, "", b"", 0,
            b"", 1, *unnumbered(delta(1))]
    assert await logs.scripts["APPEND"](late) == [b"fenced", 0]  # its own fence, but the log has ended
    assert await held(logs, "resp_f") == before
    events = await collect(RedisLogReader(logs, "resp_f", 0, 0).follow(-1))
    assert [event["sequence_number"] for event in events] == [0, 1, 2] and events[2]["delta"] == "word0 "
    await close(logs)


@on_a_loop
async def test_a_reserved_number_is_never_given_to_an_event_and_a_reader_skips_it():
    logs = await open_logs()
    writer = await admit(logs, "resp_g")
    writer.append(delta(0))
    writer.append(delta(1))
    await wait_flushed(writer)  # events 0..3
    reserved = await within(logs.reserve("resp_g"), "RESERVE did not answer")
    assert reserved == 4  # the next number, held by a placeholder for one reader's error
    writer.append(delta(2))
    writer.append(delta(3))
    writer.mark("completed")
    writer.close()
    await drained(writer)
    events = await collect(RedisLogReader(logs, "resp_g", 0, 0).follow(-1))
    assert [event["sequence_number"] for event in events] == [0, 1, 2, 3, 5, 6]
    assert [event["delta"] for event in events[2:]] == ["word0 ", "word1 ", "word2 ", "word3 "]
    assert await collect(RedisLogReader(logs, "resp_g", 0, 0).follow(3)) == events[4:]  # past the placeholder
    await close(logs)


@on_a_loop
async def test_a_heartbeat_that_meets_its_own_finished_task_hears_ended_and_one_ended_elsewhere_hears_fenced():
    """The heartbeat renews what its replica holds; the last flush of a task may finish the record before the
    heartbeat's script runs and after it listed the task. Finished under the heartbeat's own fence, that is its own
    end (`ended`), not another replica's (`fenced`: the replica would report a lapsed lease it never had)."""
    logs = await open_logs()
    ours, reaped = await admit(logs, "resp_hb_ours"), await admit(logs, "resp_hb_reaped")
    ours.mark("completed")
    ours.close()
    await drained(ours)
    assert await logs.scripts["REAP"](reap_args(logs, "resp_hb_reaped", reaped.fence, 5000.0)) == 1
    running = await admit(logs, "resp_hb_running")
    answers, _, _ = await logs.scripts["HEARTBEAT"](
        [logs.link.prefix, 1001.0, 900, 1061.0, "resp_hb_ours", ours.fence, "resp_hb_reaped", reaped.fence,
         "resp_hb_running", running.fence, "resp_hb_none", 1])
    assert answers == [b"ended", b"fenced", b"ok", b"gone"]
    assert not ours.fenced
    await close(logs)
