"""Background responses through the OpenAI SDK and raw HTTP: the spec's "Background Tasks and
Recovery" section, on both backends (this process's memory, and a real Redis shared by replicas: the same
contract). The scripted engine's per-token delay makes every timing deterministic."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.responses.store_backends import BACKENDS, over_backends, store_stats
from tests.server import prometheus_values, wait_for
from tests.responses.api.sse import EVENT_CLASSES, iter_frames, post_error, validate_response

SLOW = "tick " * 400  # 400 tokens at the delay below: ~4 s, far longer than any check needs
DELAY = 0.01


@pytest.fixture(params=BACKENDS)
def start_server(request, start_server):
    """Every test here runs on both backends."""
    return over_backends(start_server, request.param)


def background(client, **fields):
    return client.responses.create(model="m", input=fields.pop("input", "Long request"), background=True,
                                   store=True, **fields)


def read_events(http: httpx.Client, path: str, *, method: str = "GET", body: dict | None = None) -> list[dict]:
    """Every event of one SSE answer, each validated against the SDK's event types."""
    events = []
    with http.stream(method, path, json=body) as answer:
        assert answer.status_code == 200, answer.read().decode()
        for name, data in iter_frames(answer.iter_lines()):
            raw = json.loads(data)
            assert name == raw["type"]
            EVENT_CLASSES[raw["type"]].model_validate(raw)
            events.append(raw)
    return events


def state(server, response_id: str) -> str:
    return server.client().responses.retrieve(response_id).status


def wait_status(server, response_id: str, *statuses: str) -> bool:
    return wait_for(lambda: state(server, response_id) in statuses)


def last_sequence(server, response_id: str, owner: str = "public") -> int:
    """The last sequence number the task's log holds (-1: none), read on the server's loop."""
    job = server.await_on_loop(lambda: server.app.state.jobs.find(owner, response_id))
    return job.log.last if job is not None else -1


def generating(server, response_id: str, owner: str = "public") -> bool:
    """The task has published a few text deltas (it is mid-generation)."""
    return last_sequence(server, response_id, owner) > 6


def states_after_stop(start_server, server, *response_ids: str) -> list[str]:
    """The tasks' states once `server` stopped: from its job table in memory; through another replica on Redis."""
    if server.config.store == "memory":
        return [server.app.state.jobs.find_local("public", rid).state for rid in response_ids]
    other = start_server(["unused"])
    return [state(other, rid) for rid in response_ids]


# -- the spec's example -------------------------------------------------------------------------
def test_create_retrieve_stream_reconnect_cancel(start_server):
    server = start_server(["one two three four five six"], delay=DELAY)
    client = server.client()
    job = background(client)
    assert job.status == "queued" and job.background is True and job.output == []
    assert client.responses.retrieve(job.id).status in ("queued", "in_progress", "completed")
    events = list(client.responses.retrieve(job.id, stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert [e.type for e in events[:3]] == ["response.created", "response.queued", "response.in_progress"]
    assert events[0].response.status == "queued"
    assert events[-1].type == "response.completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "one two three four five six"

    resumed = list(client.responses.retrieve(job.id, stream=True, starting_after=4))
    assert [e.sequence_number for e in resumed] == list(range(5, len(events)))
    assert [e.model_dump() for e in resumed] == [e.model_dump() for e in events[5:]]

    final = client.responses.retrieve(job.id)
    assert final.status == "completed" and final.output_text == "one two three four five six"
    validate_response(server.http().get(f"/v1/responses/{job.id}").json())
    assert client.responses.cancel(job.id).status == "completed"  # finished: cancelling changes nothing


def test_background_stream_attaches_at_creation(start_server):
    server = start_server(["alpha beta"], delay=DELAY)
    with server.http() as http:
        events = read_events(http, "/v1/responses", method="POST",
                             body={"model": "m", "input": "go", "background": True, "store": True, "stream": True})
    assert [e["type"] for e in events[:3]] == ["response.created", "response.queued", "response.in_progress"]
    assert events[-1]["type"] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


def test_a_disconnected_reader_does_not_stop_the_task(start_server):
    server = start_server(["one two three four five six seven eight"], delay=0.05)
    with server.http() as http:
        with http.stream("POST", "/v1/responses", json={"model": "m", "input": "go", "background": True,
                                                        "store": True, "stream": True}) as answer:
            lines = answer.iter_lines()
            frames = iter_frames(lines)
            response_id = json.loads(next(frames)[1])["response"]["id"]
            next(frames)
    assert wait_status(server, response_id, "completed")
    assert server.client().responses.retrieve(response_id).output_text == "one two three four five six seven eight"
    assert server.engine.cancelled == 0
    assert wait_for(lambda: server.on_loop(server.app.state.jobs.stats)["readers"] == 0)


# -- cancellation ----------------------------------------------------------------------------------
def test_cancel_while_running_waits_for_cleanup(start_server):
    server = start_server([SLOW], delay=DELAY)
    client = server.client()
    job = background(client)
    assert wait_for(lambda: generating(server, job.id))
    cancelled = client.responses.cancel(job.id)
    assert cancelled.status == "cancelled"
    assert server.engine.cancelled == 1  # the engine was stopped before cancelled was published
    assert server.app.state.service.queue.busy == 0
    again = client.responses.cancel(job.id)  # idempotent
    assert again.status == "cancelled"
    assert client.responses.retrieve(job.id).status == "cancelled"
    with server.http() as http:
        events = read_events(http, f"/v1/responses/{job.id}?stream=true")
    assert events[-1]["type"] == "error" and events[-1]["code"] == "response_cancelled"
    assert not any(e["type"] in ("response.cancelled", "response.completed", "response.failed") for e in events)
    assert server.on_loop(server.app.state.jobs.stats)["cancellations"] == 1


def test_cancel_while_queued_never_generates(start_server):
    server = start_server([SLOW], delay=DELAY, environ={"MAYA_GLM_RESPONSES_JOB_WORKERS": "1"})
    client = server.client()
    first = background(client)
    second = background(client, input="second")
    assert client.responses.retrieve(second.id).status == "queued"
    assert client.responses.cancel(second.id).status == "cancelled"
    client.responses.cancel(first.id)
    assert server.engine.calls == 1
    with server.http() as http:
        events = read_events(http, f"/v1/responses/{second.id}?stream=true")
    assert [e["type"] for e in events] == ["response.created", "response.queued", "error"]
    assert events[-1]["code"] == "response_cancelled"


def test_cancelling_a_foreground_response_is_a_400_and_unknown_a_404(start_server):
    server = start_server(["ok"])
    client = server.client()
    stored = client.responses.create(model="m", input="hi", store=True)
    with pytest.raises(openai.BadRequestError):
        client.responses.cancel(stored.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.cancel("resp_unknown")


# -- cursors ----------------------------------------------------------------------------------------
def test_cursor_errors(start_server):
    server = start_server(["one two three"], environ={"MAYA_GLM_RESPONSES_EVENT_COUNT": "4"})
    client = server.client()
    job = background(client)
    assert wait_status(server, job.id, "completed")
    with server.http() as http:
        last = client.responses.retrieve(job.id)
        future = http.get(f"/v1/responses/{job.id}?stream=true&starting_after=999")
        assert future.status_code == 400 and future.json()["error"]["param"] == "starting_after"
        negative = http.get(f"/v1/responses/{job.id}?stream=true&starting_after=-1")
        assert negative.status_code == 400
        gone = http.get(f"/v1/responses/{job.id}?stream=true&starting_after=0")
        assert gone.status_code == 410 and gone.json()["error"]["param"] == "starting_after"
        replay_all = http.get(f"/v1/responses/{job.id}?stream=true")
        assert replay_all.status_code == 410
        final = last_sequence(server, job.id)
        tail = read_events(http, f"/v1/responses/{job.id}?stream=true&starting_after={final - 2}")
        assert http.get(f"/v1/responses/{job.id}?stream=true&starting_after={final + 1}").status_code == 400
    assert [e["sequence_number"] for e in tail] == [final - 1, final]
    assert tail[-1]["type"] == "response.completed"
    assert last.status == "completed"


def test_an_expired_job_record_still_retrieves_but_cannot_stream(start_server):
    now = [1000.0]
    server = start_server(["ok"], clock=lambda: now[0], environ={"MAYA_GLM_RESPONSES_JOB_TTL_S": "60"})
    client = server.client()
    job = background(client)
    assert wait_status(server, job.id, "completed")
    now[0] += 61
    assert client.responses.retrieve(job.id).status == "completed"  # from the response store
    with server.http() as http:
        answer = http.get(f"/v1/responses/{job.id}?stream=true")
    assert answer.status_code == 409


# -- readers ------------------------------------------------------------------------------------------
def test_reader_limits_and_a_freed_slot(start_server):
    server = start_server([SLOW], delay=DELAY, api_keys=("key-a", "key-b"),
                          environ={"MAYA_GLM_RESPONSES_STREAM_READERS": "2",
                                   "MAYA_GLM_RESPONSES_STREAM_OWNER_READERS": "1"})
    job_a = background(server.client("key-a"))
    job_b = background(server.client("key-b"))
    headers_a = {"Authorization": "Bearer key-a"}
    with server.http(headers=headers_a) as http_a, server.http(headers={"x-api-key": "key-b"}) as http_b:
        with http_a.stream("GET", f"/v1/responses/{job_a.id}?stream=true") as first:
            lines_a = first.iter_lines()
            next(iter_frames(lines_a))
            second = http_a.get(f"/v1/responses/{job_a.id}?stream=true")
            assert second.status_code == 429  # one reader per key
            with http_b.stream("GET", f"/v1/responses/{job_b.id}?stream=true") as other:
                lines_b = other.iter_lines()
                next(iter_frames(lines_b))
                with server.http(headers=headers_a) as third:
                    assert third.get(f"/v1/responses/{job_b.id}?stream=true").status_code == 404
        assert wait_for(lambda: server.on_loop(server.app.state.jobs.stats)["readers"] == 0)
        with http_a.stream("GET", f"/v1/responses/{job_a.id}?stream=true&starting_after=1") as again:
            assert again.status_code == 200
    assert state(server, job_a.id) == "in_progress"  # readers leaving never cancel the task
    assert server.on_loop(server.app.state.jobs.stats)["reader_rejections"] == 1


# -- deadlines and admission --------------------------------------------------------------------------
def test_deadline_fails_a_running_task_after_cleanup(start_server):
    server = start_server([SLOW], delay=DELAY, environ={"MAYA_GLM_RESPONSES_JOB_TIMEOUT_S": "1"})
    client = server.client()
    job = background(client)
    assert wait_status(server, job.id, "failed")
    final = client.responses.retrieve(job.id)
    assert "1 seconds" in final.error.message
    assert server.engine.cancelled == 1 and server.app.state.service.queue.busy == 0
    with server.http() as http:
        events = read_events(http, f"/v1/responses/{job.id}?stream=true")
    assert [e["code"] for e in events if e["type"] == "error"] == ["job_timeout"]
    assert events[-1]["type"] == "response.failed"
    assert server.on_loop(server.app.state.jobs.stats)["timeouts"] == 1


def test_deadline_fails_a_queued_task(start_server):
    server = start_server([SLOW], delay=DELAY, environ={"MAYA_GLM_RESPONSES_JOB_TIMEOUT_S": "1",
                                                        "MAYA_GLM_RESPONSES_JOB_WORKERS": "1"})
    client = server.client()
    first = background(client)
    queued = background(client, input="second")
    assert wait_status(server, queued.id, "failed")
    assert state(server, first.id) == "failed"
    with server.http() as http:
        events = read_events(http, f"/v1/responses/{queued.id}?stream=true")
    assert [e["code"] for e in events if e["type"] == "error"] == ["job_timeout"]


def test_owner_and_record_admission_limits(start_server):
    server = start_server([SLOW], delay=DELAY, api_keys=("key-a", "key-b"),
                          environ={"MAYA_GLM_RESPONSES_JOB_OWNER_ENTRIES": "1",
                                   "MAYA_GLM_RESPONSES_JOB_ENTRIES": "2"})
    a, b = server.client("key-a"), server.client("key-b")
    first = background(a)
    with pytest.raises(openai.RateLimitError):
        background(a)  # one active task per key
    second = background(b)
    with server.http(headers={"Authorization": "Bearer key-b"}) as http:
        full = post_error(http, {"model": "m", "input": "x", "background": True, "store": True}, status=429)
    assert "limit" in full["message"]
    a.responses.cancel(first.id)
    b.responses.cancel(second.id)
    third = background(a)  # finished records are evicted early to admit new tasks
    assert third.status == "queued"
    a.responses.cancel(third.id)


def test_an_oversized_input_snapshot_is_a_413(start_server):
    server = start_server(["never"], environ={"MAYA_GLM_RESPONSES_JOB_INPUT_BYTES": "4000"})
    with server.http() as http:
        error = post_error(http, {"model": "m", "input": "z" * 5000, "background": True, "store": True}, status=413)
    assert "4000" in error["message"]
    assert server.engine.calls == 0 and server.on_loop(server.app.state.jobs.stats)["records"] == 0


def test_an_oversized_event_fails_the_task_explicitly(start_server):
    server = start_server(["word " * 1500], environ={"MAYA_GLM_RESPONSES_EVENT_BYTES": "4096"})
    client = server.client()
    job = background(client)
    assert wait_status(server, job.id, "failed")
    final = client.responses.retrieve(job.id)
    assert "event" in final.error.message
    assert store_stats(server)["entries"] == 0  # the completed copy was withdrawn


# -- records, deletion, continuation -----------------------------------------------------------------
def test_active_tasks_cannot_be_deleted_or_continued(start_server):
    server = start_server([SLOW], delay=DELAY)
    client = server.client()
    job = background(client)
    with pytest.raises(openai.ConflictError):
        client.responses.delete(job.id)
    with pytest.raises(openai.ConflictError):
        client.responses.create(model="m", previous_response_id=job.id, input="next")
    client.responses.cancel(job.id)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", previous_response_id=job.id, input="next")
    assert caught.value.body["param"] == "previous_response_id" and "cancelled" in caught.value.message
    client.responses.delete(job.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(job.id)


def test_a_failed_task_cannot_be_continued(start_server):
    server = start_server([{"text": "one two three", "fail_after": 1}])
    client = server.client()
    job = background(client)
    assert wait_status(server, job.id, "failed")
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="m", previous_response_id=job.id, input="next")


def test_a_finished_record_supplies_history_after_the_cache_evicts_it(start_server):
    server = start_server(["Noted.", "other", "You said 73."], environ={"MAYA_GLM_RESPONSES_CACHE_ENTRIES": "1"})
    client = server.client()
    job = background(client, input="Remember 73")
    assert wait_status(server, job.id, "completed")
    client.responses.create(model="m", input="unrelated", store=True)  # evicts the job's cached copy
    follow = client.responses.create(model="m", previous_response_id=job.id, input="Which?", store=True)
    assert follow.output_text == "You said 73."
    assert "Remember 73" in server.engine.last_prompt_text and "Noted." in server.engine.last_prompt_text
    items = [i.content[0].text for i in client.responses.input_items.list(follow.id, order="asc")]
    assert items == ["Remember 73", "Noted.", "Which?"]


def test_input_items_of_a_running_task(start_server):
    server = start_server([SLOW], delay=DELAY)
    client = server.client()
    job = background(client, input="Long request")
    items = list(client.responses.input_items.list(job.id))
    assert [i.content[0].text for i in items] == ["Long request"]
    client.responses.cancel(job.id)


# -- isolation, shutdown, figures ---------------------------------------------------------------------
def test_other_keys_get_404_on_every_operation(start_server):
    server = start_server([SLOW], delay=DELAY, api_keys=("key-a", "key-b"))
    job = background(server.client("key-a"))
    other = server.client("key-b")
    for call in (lambda: other.responses.retrieve(job.id), lambda: other.responses.cancel(job.id),
                 lambda: other.responses.delete(job.id), lambda: list(other.responses.input_items.list(job.id)),
                 lambda: list(other.responses.retrieve(job.id, stream=True)),
                 lambda: other.responses.create(model="m", previous_response_id=job.id, input="x")):
        with pytest.raises(openai.NotFoundError):
            call()
    assert state(server, job.id) == "in_progress"
    server.client("key-a").responses.cancel(job.id)


def test_shutdown_cancels_active_tasks_in_memory_and_hands_them_over_on_redis(start_server):
    server = start_server([SLOW], delay=DELAY, environ={"MAYA_GLM_RESPONSES_JOB_WORKERS": "1"})
    client = server.client()
    running = background(client)
    queued = background(client, input="second")
    assert wait_for(lambda: generating(server, running.id))
    server.stop()
    if server.config.store == "memory":
        assert states_after_stop(start_server, server, running.id, queued.id) == ["cancelled", "cancelled"]
        assert server.engine.cancelled == 1 and server.engine.calls == 1
        return
    other = start_server([SLOW], delay=DELAY)  # the running task finished in the grace; the queued one moves here
    for response_id in (running.id, queued.id):
        assert wait_status(other, response_id, "completed", "failed", "cancelled")
        assert state(other, response_id) == "completed"
    assert server.engine.cancelled == 0 and server.engine.calls == 1


def test_shutdown_ends_connected_readers_and_cancels_their_task_in_memory_or_hands_it_over(start_server):
    server = start_server(["tick " * 4000], delay=DELAY, job_shutdown_grace_s=0)
    client = server.client()
    job = background(client)
    http = server.http()
    reader = http.stream("GET", f"/v1/responses/{job.id}?stream=true")
    answer = reader.__enter__()
    lines = answer.iter_lines()
    next(iter_frames(lines))
    server.stop()  # the grace period, then the task's cancellation (memory) or its hand-over (Redis)
    assert server.engine.cancelled == 1
    http.close()
    if server.config.store == "memory":
        assert states_after_stop(start_server, server, job.id) == ["cancelled"]
        return
    other = start_server(["tick " * 4000], delay=0)
    assert wait_status(other, job.id, "completed", "failed", "cancelled")
    final = other.client().responses.retrieve(job.id)
    assert final.status == "completed" and final.output_text.rstrip() == ("tick " * 4000).rstrip()  # continued


def test_the_stream_that_created_a_task_ends_at_shutdown_as_its_store_says(start_server):
    """The creating request's own stream (`background` with `stream: true`): in memory the task is cancelled and
    the stream ends with it; on Redis the task is handed over and the stream ends with the `error` event
    `server_shutdown`, numbered after what it was sent, never with a dropped connection."""
    server = start_server(["tick " * 4000], delay=DELAY, job_shutdown_grace_s=0)
    http = server.http()
    body = {"model": "m", "input": "Long request", "background": True, "store": True, "stream": True}
    opening = http.stream("POST", "/v1/responses", json=body)
    answer = opening.__enter__()
    frames = iter_frames(answer.iter_lines())
    first = [next(frames) for _ in range(3)]
    server.stop()
    rest = list(frames)  # what the server wrote before it closed: the stream must end, not break
    http.close()
    events = [json.loads(data) for _, data in first + rest]
    numbers = [event["sequence_number"] for event in events]
    if server.config.store == "memory":
        assert events[-1]["type"] in ("response.failed", "response.cancelled", "error")
        return
    assert events[-1]["type"] == "error" and events[-1]["code"] == "server_shutdown", events[-1]
    assert numbers[-1] > max(numbers[:-1])


def test_job_metrics_and_status(start_server):
    server = start_server([SLOW], delay=DELAY, environ={"MAYA_GLM_RESPONSES_JOB_WORKERS": "1"})
    client = server.client()
    running = background(client)
    queued = background(client, input="second")
    assert wait_for(lambda: generating(server, running.id))
    with server.http() as http:
        with http.stream("GET", f"/v1/responses/{running.id}?stream=true") as reader:
            lines = reader.iter_lines()
            next(iter_frames(lines))
            jobs = http.get("/v1/status").json()["responses"]["jobs"]
            metrics = http.get("/metrics/prometheus").text
    assert (jobs["queued"], jobs["running"], jobs["records"], jobs["readers"]) == (1, 1, 2, 1)
    values = prometheus_values(metrics, "maya:responses_jobs_")
    assert values["maya:responses_jobs_queued"] == 1
    assert values["maya:responses_jobs_running"] == 1
    assert values["maya:responses_jobs_readers"] == 1
    if server.config.store == "memory":  # on Redis, only the bytes this replica has yet to write
        assert values["maya:responses_jobs_event_bytes"] > 0
    client.responses.cancel(queued.id)
    client.responses.cancel(running.id)
    with server.http() as http:
        values = prometheus_values(http.get("/metrics/prometheus").text, "maya:responses_jobs_")
    assert values["maya:responses_jobs_cancellations_total"] == 2
    assert values['maya:responses_jobs_finished_total{state="cancelled"}'] == 2
    assert "Long request" not in metrics and running.id not in metrics
