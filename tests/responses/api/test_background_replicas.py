"""Background tasks across Maya replicas sharing one Redis (`--store redis://…`): any replica follows,
reconnects to, cancels and deletes a task another replica runs; a task never outlives its owner silently
(kill -9, SIGSTOP past the lease: with no replica able to take it over, it fails); the fleet's job bounds hold; a Redis restart loses no event.

Every replica is a real `python -m maya_server` process (tests/maya_process.py) with the scripted engine,
so the tests can kill, stop and resume it; Redis is a real redis-server on loopback (tests/redis_server.py).
Waits poll (`wait_for`) with generous limits: nothing here asserts on timing.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.maya_process import Fleet, MayaProcess
from tests.redis_server import RedisServer
from tests.responses.api.sse import EVENT_CLASSES, iter_frames
from tests.responses.store_backends import shared_redis, unique_prefix
from tests.server import wait_for

LONG = "tick " * 2000
"""2,000 tokens at 0.01 s a token: ~20 s, longer than any check below needs while it runs."""
TERMINAL = ("response.completed", "response.incomplete", "response.failed")
LEASE = "2"
"""`--job-lease-s` for a replica the test kills or stops: its tasks are failed within seconds."""
CANNOT_TAKE = ("--model-name", "another-model", "--job-claim-wait-s", "1")
"""A replica that serves another model: it never takes a task of the others over, and fails one nobody took
within a second."""
SETTLE_S = 60
"""The most any wait below polls for (lease + heartbeat + a loaded two-core box)."""


@pytest.fixture
def fleet(tmp_path):
    """Replicas on the session's redis-server, under this test's own key prefix."""
    replicas = Fleet(tmp_path, shared_redis().url, unique_prefix())
    try:
        yield replicas
    finally:
        replicas.close()


# -- helpers --------------------------------------------------------------------------------
def create(replica: MayaProcess, input: str = "Long request", **fields) -> dict:
    with replica.http() as http:
        answer = http.post("/v1/responses", json={"model": "m", "input": input, "background": True, "store": True,
                                                  **fields})
    assert answer.status_code == 200, answer.text
    return answer.json()


def retrieve(replica: MayaProcess, response_id: str) -> httpx.Response:
    with replica.http() as http:
        return http.get(f"/v1/responses/{response_id}")


def status(replica: MayaProcess, response_id: str) -> str | None:
    answer = retrieve(replica, response_id)
    return answer.json()["status"] if answer.status_code == 200 else None


def bounded(lines, timeout: float):
    """The lines of a stream, failing the test if it has not ended after `timeout` (keep-alive comments would
    otherwise keep a stream that never ends open for ever)."""
    deadline = time.monotonic() + timeout
    for line in lines:
        assert time.monotonic() < deadline, f"the stream did not end within {timeout}s"
        yield line


def read(replica: MayaProcess, response_id: str, starting_after: int | None = None, limit: int | None = None,
         timeout: float = 120) -> list[dict]:
    """The events of one `GET …?stream=true` through `replica` (at most `limit`, then it breaks off), each
    checked against the SDK's event types."""
    query = "stream=true" + (f"&starting_after={starting_after}" if starting_after is not None else "")
    events: list[dict] = []
    with replica.http(timeout) as http, http.stream("GET", f"/v1/responses/{response_id}?{query}") as answer:
        assert answer.status_code == 200, answer.read().decode()
        for name, data in iter_frames(bounded(answer.iter_lines(), timeout)):
            event = json.loads(data)
            assert name == event["type"]
            EVENT_CLASSES[event["type"]].model_validate(event)
            events.append(event)
            if limit is not None and len(events) == limit:
                break
    return events


class Reader(threading.Thread):
    """A reader that follows a task through one replica in the background, until its stream ends."""

    def __init__(self, replica: MayaProcess, response_id: str) -> None:
        super().__init__(daemon=True)
        self.replica, self.response_id = replica, response_id
        self.events: list[dict] = []
        self.failure: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            with self.replica.http(SETTLE_S * 2) as http, \
                    http.stream("GET", f"/v1/responses/{self.response_id}?stream=true") as answer:
                assert answer.status_code == 200, answer.read().decode()
                for _, data in iter_frames(answer.iter_lines()):
                    self.events.append(json.loads(data))
        except BaseException as exc:  # reported by the test through `ended`
            self.failure = exc

    def deltas(self) -> int:
        return sum(event["type"] == "response.output_text.delta" for event in list(self.events))

    def ended(self, timeout: float = SETTLE_S) -> list[dict]:
        self.join(timeout)
        assert not self.is_alive(), f"the reader through {self.replica.name} still hangs: {self.events[-3:]}"
        assert self.failure is None, f"the reader through {self.replica.name} failed: {self.failure!r}"
        return self.events


def running(reader: Reader, deltas: int = 5) -> None:
    """The task is mid-generation: its reader has seen a few text deltas."""
    assert wait_for(lambda: reader.deltas() >= deltas or not reader.is_alive(), SETTLE_S), reader.events[-3:]
    assert reader.deltas() >= deltas, f"the task did not generate: {reader.events[-3:]} {reader.failure!r}"


def numbers(events: list[dict]) -> list[int]:
    return [event["sequence_number"] for event in events]


def assert_ends_failed_for_owner_lost(events: list[dict]) -> None:
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"], [e["type"] for e in events[-3:]]
    assert events[-2]["code"] == "background_owner_lost"
    assert events[-1]["response"]["status"] == "failed"
    assert numbers(events) == sorted(set(numbers(events)))


def assert_failed_with_server_error(replica: MayaProcess, response_id: str) -> None:
    answer = retrieve(replica, response_id)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "failed" and body["error"]["code"] == "server_error", body


def jobs_status(replica: MayaProcess) -> dict:
    return replica.status()["responses"]["jobs"]


# -- status ----------------------------------------------------------------------------------
def test_status_names_the_job_backend(fleet):
    on_redis = fleet.start()
    in_memory = fleet.start(store="memory")
    assert jobs_status(on_redis)["backend"] == "redis"
    assert jobs_status(in_memory)["backend"] == "memory"


# -- following a task through another replica -----------------------------------------------
def test_a_reader_on_b_reconnecting_twice_gets_exactly_a_s_own_stream(fleet):
    text = " ".join(f"w{n}" for n in range(150))
    a = fleet.start([text], delay=0.02)
    b = fleet.start()
    job = create(a)
    assert job["status"] == "queued"
    first = read(b, job["id"], limit=10)
    second = read(b, job["id"], starting_after=first[-1]["sequence_number"], limit=10)
    rest = read(b, job["id"], starting_after=second[-1]["sequence_number"])
    seen = first + second + rest
    assert len(first) == len(second) == 10 and rest[-1]["type"] == "response.completed"
    assert numbers(seen) == list(range(len(seen)))  # no gap, no duplicate

    own = read(a, job["id"])  # A's whole stream, after completion
    assert seen == own
    assert retrieve(b, job["id"]).json() == retrieve(a, job["id"]).json()
    final = retrieve(b, job["id"]).json()
    assert final["status"] == "completed"
    assert "".join(part["text"] for item in final["output"] for part in item["content"]) == text
    with b.http() as http:  # finished: cancelling through another replica changes nothing
        assert http.post(f"/v1/responses/{job['id']}/cancel").json()["status"] == "completed"
    assert read(b, job["id"]) == own


def test_streams_through_both_replicas_carry_the_same_events_live(fleet):
    a = fleet.start([" ".join(f"w{n}" for n in range(120))], delay=0.02)
    b = fleet.start()
    with a.http() as http, http.stream("POST", "/v1/responses", json={
            "model": "m", "input": "Long request", "background": True, "store": True, "stream": True}) as answer:
        assert answer.status_code == 200
        frames = iter_frames(answer.iter_lines())
        created = json.loads(next(frames)[1])
        on_b = Reader(b, created["response"]["id"])
        on_a = [created] + [json.loads(data) for _, data in frames]
    assert on_b.ended() == on_a
    assert on_a[-1]["type"] == "response.completed" and numbers(on_a) == list(range(len(on_a)))


# -- cancel and delete through any replica ---------------------------------------------------
def test_cancel_through_b_reaches_the_task_running_on_a(fleet):
    a = fleet.start([LONG])
    b = fleet.start()
    job = create(a)
    on_b, on_a = Reader(b, job["id"]), Reader(a, job["id"])
    running(on_b)
    with b.http() as http:
        cancelled = http.post(f"/v1/responses/{job['id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] in ("cancelled", "in_progress")  # in_progress only if A took over 5 s
    events = on_b.ended()
    assert events[-1]["type"] == "error" and events[-1]["code"] == "response_cancelled", events[-3:]
    assert on_a.ended() == events  # the same events, the same numbers, through either replica
    assert numbers(events) == sorted(set(numbers(events)))
    for replica in (a, b):
        assert wait_for(lambda: status(replica, job["id"]) == "cancelled", SETTLE_S)
    with a.http() as http:
        again = http.post(f"/v1/responses/{job['id']}/cancel")  # idempotent, on the other replica too
    assert again.status_code == 200 and again.json()["status"] == "cancelled"
    assert read(b, job["id"]) == events  # the record keeps the terminal event; nothing follows it
    assert read(b, job["id"], starting_after=events[-1]["sequence_number"], timeout=30) == []  # and it ends


def test_cancel_through_b_while_the_owner_is_stopped_says_in_progress_until_the_owner_cleans_up(fleet):
    a = fleet.start([LONG], "--job-lease-s", "30")  # the lease outlasts the pause: A still owns the task
    b = fleet.start()
    job = create(a)
    on_b = Reader(b, job["id"])
    running(on_b)
    a.pause()
    try:
        with b.http() as http:
            asked = http.post(f"/v1/responses/{job['id']}/cancel")  # waits its five seconds, in vain
    finally:
        a.resume()
    assert asked.status_code == 200, asked.text
    assert asked.json()["status"] == "in_progress"  # no cancelled state while A still holds the generation
    events = on_b.ended()  # A, resumed, picks up the cancel, cleans up, then publishes the end
    assert events[-1]["type"] == "error" and events[-1]["code"] == "response_cancelled", events[-3:]
    for replica in (a, b):
        assert wait_for(lambda: status(replica, job["id"]) == "cancelled", SETTLE_S)


def test_a_queued_task_cancelled_through_b_never_starts(fleet):
    a = fleet.start([LONG], environ={"MAYA_GLM_RESPONSES_JOB_WORKERS": "1"})
    b = fleet.start()
    busy = create(a)
    waiting = create(a)
    assert wait_for(lambda: status(b, busy["id"]) == "in_progress", SETTLE_S)
    assert status(b, waiting["id"]) == "queued"
    with b.http() as http:
        cancelled = http.post(f"/v1/responses/{waiting['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] in ("cancelled", "queued")
    assert wait_for(lambda: status(a, waiting["id"]) == "cancelled", SETTLE_S)
    events = read(b, waiting["id"])
    assert events[-1]["type"] == "error" and events[-1]["code"] == "response_cancelled"
    assert not any(e["type"] == "response.in_progress" for e in events)  # it never started
    assert status(b, busy["id"]) == "in_progress"  # the other task is untouched


def _continue(replica: MayaProcess, response_id: str) -> httpx.Response:
    with replica.http() as http:
        return http.post("/v1/responses", json={"model": "m", "input": "and then?",
                                                "previous_response_id": response_id})


def test_delete_and_continue_of_an_active_task_are_409_on_every_replica_then_work_through_any(fleet):
    a = fleet.start([LONG])
    b = fleet.start()
    job = create(a)
    for replica in (a, b):
        with replica.http() as http:
            refused = http.delete(f"/v1/responses/{job['id']}")
        assert refused.status_code == 409, (replica.name, refused.text)
        assert refused.json()["error"]["type"] == "invalid_request_error"
    assert status(a, job["id"]) in ("queued", "in_progress")  # nothing changed
    continued = _continue(b, job["id"])
    assert continued.status_code == 409 and continued.json()["error"]["param"] == "previous_response_id", continued.text
    with b.http() as http:
        assert http.post(f"/v1/responses/{job['id']}/cancel").status_code == 200
    assert wait_for(lambda: status(a, job["id"]) == "cancelled", SETTLE_S)
    continued = _continue(b, job["id"])  # a cancelled task cannot be continued, through any replica
    assert continued.status_code == 400 and continued.json()["error"]["param"] == "previous_response_id", continued.text
    with b.http() as http:
        deleted = http.delete(f"/v1/responses/{job['id']}")
    assert deleted.status_code == 200 and deleted.json()["deleted"] is True, deleted.text
    for replica in (a, b):
        assert retrieve(replica, job["id"]).status_code == 404


# -- a task never outlives its owner silently -------------------------------------------------
def test_kill_9_of_the_owner_fails_its_tasks_once_when_no_replica_can_take_them(fleet):
    """B and C serve another model: neither may take A's tasks over (test_background_handover.py has the replicas
    that do), so both are failed once the claim wait is over, whoever of B and C gets there first."""
    a = fleet.start([LONG], "--job-lease-s", LEASE, environ={"MAYA_GLM_RESPONSES_JOB_WORKERS": "1"})
    b, c = (fleet.start(["ok"], *CANNOT_TAKE) for _ in range(2))
    runs, waits = create(a), create(a)
    on_b, on_c = Reader(b, runs["id"]), Reader(c, runs["id"])
    running(on_b)
    assert status(b, waits["id"]) == "queued"  # one worker: it waits behind the first
    waiting_reader = Reader(c, waits["id"])
    a.kill()

    events = on_b.ended()
    assert_ends_failed_for_owner_lost(events)
    assert on_c.ended() == events  # B and C both watch for lapsed leases: the task is failed once
    assert sum(e["type"] == "response.failed" for e in events) == 1
    assert_failed_with_server_error(b, runs["id"])
    assert wait_for(lambda: status(c, waits["id"]) not in ("queued", "in_progress"), SETTLE_S)
    assert_failed_with_server_error(c, waits["id"])  # a queued task is failed, never left queued
    queued_events = waiting_reader.ended()
    assert queued_events[-1]["type"] == "response.failed", queued_events[-3:]
    assert not any(e["type"] == "response.in_progress" for e in queued_events)  # no one ran it
    assert read(b, runs["id"]) == events  # a new reader gets the whole record and its end at once


def test_sigstop_past_the_lease_then_sigcont_the_late_owner_is_fenced(fleet):
    a = fleet.start([LONG], "--job-lease-s", LEASE)
    b = fleet.start(["ok"], *CANNOT_TAKE)
    job = create(a)
    on_b = Reader(b, job["id"])
    running(on_b)
    a.pause()
    try:
        assert_ends_failed_for_owner_lost(on_b.ended())
        assert_failed_with_server_error(b, job["id"])
        before = read(b, job["id"])
    finally:
        a.resume()
    assert before == on_b.events and before[-1]["type"] == "response.failed"
    assert wait_for(lambda: jobs_status(a)["fenced"] >= 1, SETTLE_S), jobs_status(a)
    time.sleep(3)  # A's generation and heartbeat had time to try writing again
    for replica in (a, b):
        assert read(replica, job["id"]) == before  # nothing appended after the terminal events
        assert read(replica, job["id"], starting_after=before[-1]["sequence_number"], timeout=30) == []
        assert_failed_with_server_error(replica, job["id"])
    assert jobs_status(a)["fenced"] >= 1


def test_the_deadline_of_a_task_on_a_fails_it_for_a_reader_on_b(fleet):
    environ = {"MAYA_GLM_RESPONSES_JOB_TIMEOUT_S": "2"}
    a = fleet.start([LONG], environ=environ)
    b = fleet.start(environ=environ)
    job = create(a)
    events = Reader(b, job["id"]).ended()
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"], events[-3:]
    assert events[-2]["code"] == "job_timeout"
    assert_failed_with_server_error(b, job["id"])


# -- keys and readers ------------------------------------------------------------------------
def test_another_key_finds_nothing_of_a_task_through_any_replica(fleet):
    keys = ("--api-key", "key-one", "--api-key", "key-two")
    a, b = fleet.start([LONG], *keys), fleet.start(["ok"], *keys)
    with a.http(api_key="key-one") as http:
        job = http.post("/v1/responses", json={"model": "m", "input": "mine", "background": True, "store": True}).json()
    for replica in (a, b):
        with replica.http(api_key="key-two") as http:
            path = f"/v1/responses/{job['id']}"
            answers = [http.get(path), http.get(path + "?stream=true"), http.post(path + "/cancel"), http.delete(path)]
        assert [answer.status_code for answer in answers] == [404] * 4, [answer.text for answer in answers]
    with b.http(api_key="key-one") as http:
        assert http.get(f"/v1/responses/{job['id']}").json()["status"] in ("queued", "in_progress")
        assert http.post(f"/v1/responses/{job['id']}/cancel").status_code == 200


def test_reader_bounds_hold_per_replica(fleet):
    environ = {"MAYA_GLM_RESPONSES_STREAM_READERS": "1"}
    a, b = fleet.start([LONG], environ=environ), fleet.start(environ=environ)
    job = create(a)
    on_a, on_b = Reader(a, job["id"]), Reader(b, job["id"])
    running(on_a)
    running(on_b)  # one reader on each replica: each replica counts its own
    with b.http() as http:
        refused = http.get(f"/v1/responses/{job['id']}?stream=true")
    assert refused.status_code == 429 and refused.json()["error"]["type"] == "rate_limit_error", refused.text
    with a.http() as http:
        assert http.post(f"/v1/responses/{job['id']}/cancel").status_code == 200
    for reader in (on_a, on_b):
        assert reader.ended()[-1]["code"] == "response_cancelled"


def test_cursors_through_b_are_checked_against_the_shared_log(fleet):
    environ = {"MAYA_GLM_RESPONSES_EVENT_COUNT": "20"}
    a = fleet.start([" ".join(f"w{n}" for n in range(60))], environ=environ)
    b = fleet.start(environ=environ)
    job = create(a)
    assert wait_for(lambda: status(b, job["id"]) == "completed", SETTLE_S)

    def answer(cursor: int | None) -> httpx.Response:
        """The answer's status and, for a refusal, its body (a stream is closed unread: it must not hang)."""
        query = "stream=true" + (f"&starting_after={cursor}" if cursor is not None else "")
        with b.http() as http, http.stream("GET", f"/v1/responses/{job['id']}?{query}") as streamed:
            if streamed.status_code != 200:
                streamed.read()
            return streamed

    assert answer(None).status_code == 410  # the first events are no longer retained
    oldest = next(cursor for cursor in range(200) if answer(cursor).status_code != 410)
    tail = read(b, job["id"], starting_after=oldest)
    assert len(tail) == 20 and tail[-1]["type"] == "response.completed"  # the 20 retained events
    assert numbers(tail) == list(range(oldest + 1, oldest + 21))
    assert tail == read(a, job["id"], starting_after=oldest)
    last = tail[-1]["sequence_number"]
    behind, future = answer(oldest - 1), answer(last + 1)
    assert behind.status_code == 410, f"a cursor before the retained events got {behind.status_code}"
    assert behind.json()["error"]["param"] == "starting_after"
    assert future.status_code == 400, f"starting_after={last + 1}, past the last event {last}: {future.status_code}"
    assert future.json()["error"]["param"] == "starting_after"
    assert answer(last).status_code == 200 and read(b, job["id"], starting_after=last) == []  # nothing after the end


def test_a_task_record_past_its_retention_is_gone_on_every_replica_but_its_stored_copy_stays(fleet):
    environ = {"MAYA_GLM_RESPONSES_JOB_TTL_S": "1"}
    a = fleet.start([" ".join(f"w{n}" for n in range(100))], delay=0.02, environ=environ)
    b = fleet.start(environ=environ)
    job = create(a)
    followed = Reader(b, job["id"]).ended()  # attached while the record lives: B streams it to its end
    assert followed[-1]["type"] == "response.completed"

    def streaming(replica: MayaProcess) -> int:
        with replica.http() as http:
            return http.get(f"/v1/responses/{job['id']}?stream=true").status_code

    for replica in (a, b):  # the event record expired: streaming is 409, retrieval comes from the store
        assert wait_for(lambda: streaming(replica) == 409, SETTLE_S)
        assert status(replica, job["id"]) == "completed"


def test_sigterm_of_a_replica_that_only_reads_ends_its_streams_and_the_task_goes_on(fleet):
    a = fleet.start([" ".join(f"w{n}" for n in range(400))], delay=0.02)
    b = fleet.start()
    job = create(a)
    on_b, on_a = Reader(b, job["id"]), Reader(a, job["id"])
    running(on_b)
    b.terminate()
    assert b.wait(SETTLE_S) == 0, b.tail()  # its open stream did not hold the shutdown
    events = on_b.ended()
    assert events[-1]["type"] == "error" and events[-1]["code"] == "server_shutdown", events[-3:]
    whole = on_a.ended()
    assert whole[-1]["type"] == "response.completed"  # the task on A was not touched
    assert events[:-1] == whole[:len(events) - 1]


# -- bounds for the fleet ------------------------------------------------------------------
def _create_at_once(bodies: list[tuple[MayaProcess, dict]]) -> list[httpx.Response]:
    def post(item):
        replica, body = item
        with replica.http() as http:
            return http.post("/v1/responses", json={"model": "m", "input": "Long request", "background": True,
                                                    "store": True, **body})

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(post, bodies))


def test_the_per_key_job_bound_holds_for_two_replicas_at_once(fleet):
    environ = {"MAYA_GLM_RESPONSES_JOB_OWNER_ENTRIES": "2"}
    a, b = fleet.start([LONG], environ=environ), fleet.start([LONG], environ=environ)
    answers = _create_at_once([(a, {}), (b, {}), (a, {}), (b, {})])
    codes = sorted(answer.status_code for answer in answers)
    assert codes == [200, 200, 429, 429], [answer.text for answer in answers]
    for answer in answers:
        if answer.status_code == 429:
            assert answer.json()["error"]["type"] == "rate_limit_error"
    admitted = [answer.json()["id"] for answer in answers if answer.status_code == 200]
    with b.http() as http:  # a slot frees when a task ends, through whichever replica cancels it
        assert http.post(f"/v1/responses/{admitted[0]}/cancel").status_code == 200
    assert wait_for(lambda: status(a, admitted[0]) == "cancelled", SETTLE_S)
    assert create(a)["status"] == "queued"


def test_the_job_record_bound_holds_for_two_replicas_at_once(fleet):
    environ = {"MAYA_GLM_RESPONSES_JOB_ENTRIES": "3", "MAYA_GLM_RESPONSES_JOB_OWNER_ENTRIES": "10"}
    a, b = fleet.start([LONG], environ=environ), fleet.start([LONG], environ=environ)
    answers = _create_at_once([(a, {}), (b, {}), (a, {}), (b, {})])
    assert sorted(answer.status_code for answer in answers) == [200, 200, 200, 429], [a.text for a in answers]
    admitted = [answer.json()["id"] for answer in answers if answer.status_code == 200]
    with a.http() as http:  # a finished record gives way to a new task, whichever replica admits it
        assert http.post(f"/v1/responses/{admitted[0]}/cancel").status_code == 200
    assert wait_for(lambda: status(b, admitted[0]) == "cancelled", SETTLE_S)
    assert create(b)["status"] == "queued"
    with a.http() as http:
        full = http.post("/v1/responses", json={"model": "m", "input": "x", "background": True, "store": True})
    assert full.status_code == 429, full.text  # three active again: the fleet is full


# -- Redis restarted mid-task ----------------------------------------------------------------
def _follow_through_outages(replica: MayaProcess, response_id: str, skipped: list[dict]) -> list[dict]:
    """A reader that reconnects with `starting_after` whenever its stream breaks, until the terminal event.
    A reader-local `error` about the store (not the task's end) is set aside in `skipped` and reconnected."""
    events: list[dict] = []
    deadline = time.monotonic() + SETTLE_S * 2
    while time.monotonic() < deadline:
        cursor = events[-1]["sequence_number"] if events else None
        query = "stream=true" + (f"&starting_after={cursor}" if cursor is not None else "")
        try:
            with replica.http(30) as http, http.stream("GET", f"/v1/responses/{response_id}?{query}") as answer:
                if answer.status_code == 503:
                    answer.read()
                    time.sleep(0.2)
                    continue
                assert answer.status_code == 200, answer.read().decode()
                for _, data in iter_frames(answer.iter_lines()):
                    event = json.loads(data)
                    if event["type"] == "error" and event.get("code") == "store_unavailable":
                        skipped.append(event)
                        break
                    events.append(event)
                    if event["type"] in TERMINAL:
                        return events
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError(f"the reader never reached the end: {events[-3:]}")


def test_redis_restarted_mid_task_the_task_completes_and_readers_lose_no_event(fleet, tmp_path):
    (tmp_path / "redis").mkdir()
    redis = RedisServer(tmp_path / "redis", persistent=True)
    try:
        fleet.store = redis.url
        text = " ".join(f"w{n}" for n in range(300))
        a = fleet.start([text], "--store-command-timeout", "0.5", delay=0.02)
        b = fleet.start(["ok"], "--store-command-timeout", "0.5")
        job = create(a)
        skipped: list[dict] = []
        with ThreadPoolExecutor(2) as pool:
            following = [pool.submit(_follow_through_outages, replica, job["id"], skipped) for replica in (b, a)]
            assert wait_for(lambda: (status(b, job["id"]) == "in_progress"
                                     and len(retrieve(b, job["id"]).json()["output"]) > 0), SETTLE_S)
            redis.kill()
            time.sleep(1)
            redis.start()
            on_b, on_a = (future.result(timeout=SETTLE_S * 3) for future in following)
        assert on_b[-1]["type"] == "response.completed", (on_b[-3:], fleet.logs())
        assert numbers(on_b) == list(range(len(on_b)))  # every event exactly once, gapless
        assert on_b == on_a == read(a, job["id"])
        for replica in (a, b):
            assert wait_for(lambda: status(replica, job["id"]) == "completed", SETTLE_S)
        final = retrieve(b, job["id"]).json()
        assert "".join(part["text"] for item in final["output"] for part in item["content"]) == text
    finally:
        fleet.close()
        redis.stop()


# -- continuing a finished task through another replica --------------------------------------
def test_continuing_a_finished_task_through_b_after_the_cache_evicted_it(fleet):
    environ = {"MAYA_GLM_RESPONSES_CACHE_ENTRIES": "1"}
    a = fleet.start(["The value is 73."], environ=environ)
    b = fleet.start(["You said 73."], environ=environ)
    job = create(a, input="Remember 73")
    assert wait_for(lambda: status(b, job["id"]) == "completed", SETTLE_S)
    with b.http() as http:
        for n in range(2):  # the cache keeps one response: these evict the task's stored copy
            other = http.post("/v1/responses", json={"model": "m", "input": f"other {n}", "store": True})
            assert other.status_code == 200, other.text
        continued = http.post("/v1/responses", json={"model": "m", "input": "What value?", "store": True,
                                                     "previous_response_id": job["id"]})
        assert continued.status_code == 200, continued.text
        items = http.get(f"/v1/responses/{continued.json()['id']}/input_items", params={"order": "asc"})
    assert items.status_code == 200, items.text
    texts = [part["text"] for item in items.json()["data"] for part in item["content"]]
    assert texts == ["Remember 73", "The value is 73.", "What value?"]
