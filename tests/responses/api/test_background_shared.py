"""Background tasks on a shared Redis, two replicas in this process (real servers on loopback, a real
redis-server): any replica follows, cancels, deletes and continues a task another replica runs; the
fleet's bounds hold; a replica whose lease lapsed is fenced out. The subprocess tests
(`test_background_replicas.py`) kill and stop real Maya processes; these look at the same contract where a
test can reach inside a replica."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from tests.redis_server import RedisServer
from tests.responses.api.sse import iter_frames
from tests.responses.store_backends import shared_redis, unique_prefix
from tests.server import wait_for

DELAY = 0.01
SLOW = "tick " * 300


def fleet(start_server, scripts, **config):
    """Servers sharing one Redis and one prefix (one per script list: the first is A, the next B...)."""
    config.setdefault("store", shared_redis().url)
    config.setdefault("store_prefix", unique_prefix())
    delay = config.pop("delay", DELAY)
    return [start_server(script, delay=delay, **config) for script in scripts]


def background(server, **fields):
    return server.client().responses.create(model="m", input=fields.pop("input", "Long request"), background=True,
                                            store=True, **fields)


def read(server, response_id: str, *, after: int | None = None, stop_after: int | None = None,
         into: list | None = None) -> list[dict]:
    """The task's events from one replica (from the start, or after `after`), leaving after `stop_after`;
    `into` (a list) shows them as they come."""
    query = "stream=true" + (f"&starting_after={after}" if after is not None else "")
    events: list[dict] = into if into is not None else []
    with server.http() as http, http.stream("GET", f"/v1/responses/{response_id}?{query}") as answer:
        assert answer.status_code == 200, answer.read().decode()
        for name, data in iter_frames(answer.iter_lines()):
            events.append(json.loads(data))
            assert name == events[-1]["type"]
            if stop_after is not None and len(events) == stop_after:
                break
    return events


def status(server, response_id: str) -> str:
    return server.client().responses.retrieve(response_id).status


def test_a_reader_on_b_reconnecting_through_a_and_b_gets_a_s_stream_without_gap_or_duplicate(start_server):
    a, b = fleet(start_server, [[SLOW], ["unused"]])
    job = background(a)
    pieces = read(b, job.id, stop_after=12)
    pieces += read(a, job.id, after=pieces[-1]["sequence_number"], stop_after=15)
    pieces += read(b, job.id, after=pieces[-1]["sequence_number"])
    whole = read(a, job.id)
    assert pieces == whole
    assert [event["sequence_number"] for event in whole] == list(range(len(whole)))
    assert whole[-1]["type"] == "response.completed"
    with b.http() as http:
        assert http.get(f"/v1/responses/{job.id}").json() == whole[-1]["response"]


def test_cancel_through_b_reaches_a_which_cleans_up_before_cancelled(start_server):
    a, b = fleet(start_server, [[SLOW], ["unused"]])
    job = background(a)
    assert wait_for(lambda: status(b, job.id) == "in_progress")
    with b.http() as http, \
            http.stream("GET", f"/v1/responses/{job.id}?stream=true") as reader:
        cancelled = b.client().responses.cancel(job.id)
        events = [json.loads(data) for _, data in iter_frames(reader.iter_lines())]
    assert cancelled.status == "cancelled"
    assert events[-1]["type"] == "error" and events[-1]["code"] == "response_cancelled"
    assert a.engine.cancelled == 1  # A's generation was stopped, not left running
    assert status(a, job.id) == "cancelled" and b.client().responses.cancel(job.id).status == "cancelled"
    with pytest.raises(openai.BadRequestError):  # a cancelled task cannot be continued, from either replica
        a.client().responses.create(model="m", previous_response_id=job.id, input="more")


def test_an_active_task_cannot_be_deleted_from_any_replica_and_a_finished_one_goes_everywhere(start_server):
    a, b = fleet(start_server, [[SLOW], ["unused"]])
    job = background(a)
    for replica in (a, b):
        with pytest.raises(openai.ConflictError):
            replica.client().responses.delete(job.id)
    b.client().responses.cancel(job.id)
    b.client().responses.delete(job.id)
    for replica in (a, b):
        with pytest.raises(openai.NotFoundError):
            replica.client().responses.retrieve(job.id)


def test_a_finished_task_continues_through_b_after_the_response_cache_evicted_it(start_server):
    env = {"MAYA_GLM_RESPONSES_CACHE_ENTRIES": "1"}
    a, b = fleet(start_server, [["The answer is 42."], ["Noted.", "You said 42."]], environ=env)
    job = background(a, input="What is the answer?")
    assert wait_for(lambda: status(a, job.id) == "completed")
    b.client().responses.create(model="m", input="something else", store=True)  # evicts the task's stored copy
    follow = b.client().responses.create(model="m", previous_response_id=job.id, input="Say it again")
    assert follow.output_text == "You said 42."
    prompt = b.engine.last_prompt_text
    assert "What is the answer?" in prompt and "The answer is 42." in prompt


def test_the_owner_bound_holds_across_replicas(start_server):
    env = {"MAYA_GLM_RESPONSES_JOB_OWNER_ENTRIES": "2"}
    a, b = fleet(start_server, [[SLOW] * 3, [SLOW] * 3], environ=env)
    background(a)
    background(b)
    for replica in (a, b):
        with pytest.raises(openai.RateLimitError):
            background(replica)
    fleet_figures = b.on_loop(b.app.state.jobs.stats)
    assert fleet_figures["rejections"] == 1 and fleet_figures["backend"] == "redis"


def test_cursors_are_checked_against_the_shared_log(start_server):
    env = {"MAYA_GLM_RESPONSES_EVENT_COUNT": "8"}
    a, b = fleet(start_server, [["one two three four five six seven eight nine ten"], ["unused"]], environ=env)
    job = background(a)
    assert wait_for(lambda: status(a, job.id) == "completed")
    with b.http() as http:
        gone = http.get(f"/v1/responses/{job.id}?stream=true&starting_after=0")
        future = http.get(f"/v1/responses/{job.id}?stream=true&starting_after=999")
    assert gone.status_code == 410 and gone.json()["error"]["param"] == "starting_after"
    assert future.status_code == 400 and future.json()["error"]["param"] == "starting_after"
    oldest = int(gone.json()["error"]["message"].split("oldest kept is ")[1].rstrip(").").split(")")[0])
    tail = read(b, job.id, after=oldest - 1)
    assert tail[-1]["type"] == "response.completed" and len(tail) <= 8
    assert [event["sequence_number"] for event in tail] == list(range(oldest, oldest + len(tail)))


def _silent_owner_and_b(start_server, **b_config):
    """A, whose heartbeat is stopped (as when A is stopped) and whose second task waits in its queue, so nothing
    renews that task's lease; and B on the same Redis."""
    env = {"MAYA_GLM_RESPONSES_JOB_WORKERS": "1"}  # the second task waits in A's queue, not in its engine
    shared = {"store": shared_redis().url, "store_prefix": unique_prefix(), "job_lease_s": 1.0, "environ": env}
    a = start_server(["tick " * 400, "never"], delay=DELAY, **shared)
    b = start_server(["waited"], delay=DELAY, **shared, **b_config)
    a.await_on_loop(lambda: _stop_heartbeat(a))
    return a, b, background(a), background(a)


def test_a_task_whose_lease_lapsed_is_failed_when_no_replica_can_take_it_and_its_owner_is_fenced_out(start_server):
    """B serves another model: it cannot take the waiting task over, and fails it once the claim wait is over;
    when A's worker finally starts it, A's first write is refused and A stops it."""
    a, b, running, waiting = _silent_owner_and_b(start_server, model_name="another-model", job_claim_wait_s=1.0)
    events = read(b, waiting.id)
    assert [event["type"] for event in events][-2:] == ["error", "response.failed"]
    assert events[-2]["code"] == "background_owner_lost"
    failed = b.client().responses.retrieve(waiting.id)
    assert failed.status == "failed" and failed.error.code == "server_error"
    assert wait_for(lambda: status(a, running.id) == "completed", 30)
    assert wait_for(lambda: a.on_loop(a.app.state.jobs.stats)["fenced"] == 1)
    assert read(b, waiting.id) == events  # nothing was appended after the end
    assert status(a, waiting.id) == "failed" and a.engine.calls == 1  # "never" was not generated
    assert b.on_loop(b.app.state.jobs.stats)["reaped"] == 1


def test_a_queued_task_whose_lease_lapsed_is_taken_over_and_run_by_another_replica(start_server):
    """B serves the same model: it takes the waiting task over and runs it from its start; A's worker, when it
    finally starts it, is refused at its first write and generates nothing."""
    a, b, running, waiting = _silent_owner_and_b(start_server)
    events = read(b, waiting.id)
    assert events[-1]["type"] == "response.completed", events[-3:]
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == "waited"
    assert wait_for(lambda: status(a, running.id) == "completed", 30)
    assert wait_for(lambda: a.on_loop(a.app.state.jobs.stats)["fenced"] == 1)
    assert read(b, waiting.id) == events and a.engine.calls == 1
    assert b.on_loop(b.app.state.jobs.stats)["claimed"] == 1


async def _stop_heartbeat(server) -> None:
    jobs = server.app.state.jobs
    jobs._heartbeat.cancel()


def test_redis_restarted_mid_task_loses_no_event_and_the_task_completes(start_server, tmp_path):
    redis = RedisServer(tmp_path, persistent=True)
    try:
        a, b = fleet(start_server, [[SLOW], ["unused"]], store=redis.url, store_command_timeout=0.5,
                     store_connect_timeout=0.5)
        job = background(a)
        with ThreadPoolExecutor(1) as pool:
            seen: list[dict] = []
            reader = pool.submit(read, b, job.id, into=seen)
            assert wait_for(lambda: len(seen) > 5)  # the reader is following before Redis goes away
            redis.kill()
            time.sleep(1.0)
            redis.start()
            events = reader.result(timeout=60)
        assert [event["sequence_number"] for event in events] == list(range(len(events)))
        assert events[-1]["type"] == "response.completed"
        assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == SLOW.strip()
        assert read(a, job.id) == events and status(a, job.id) == "completed"
    finally:
        redis.stop()
