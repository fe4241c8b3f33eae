"""A stored turn has one holder that releases it once, on every path a request can take.

"Released" is read off the store's own figures: no assembly bytes in flight, and once every
stored response is deleted, no bytes and no entries. A continuation still pinned would keep
its history's bytes in the store after its base response is deleted.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from maya_server.errors import InvalidRequestError
from maya_server.responses.jobs.manager import JobManager
from maya_server.responses.endpoints.records import ResponseRecords
from maya_server.responses.settings import ResponsesSettings
from maya_server.responses.store.memory import MemoryStore
from maya_server.responses.persistence.stored_turn import StoredTurn

from tests.responses.api.sse import iter_frames, read_stream
from tests.server import wait_for
from tests.responses.helpers import parse
from tests.responses.store.test_core import answer, item, response

OWNER = "public"  # the owner of every request to a server without API keys
SLOW = "tick " * 400  # ~4 s at the delay below: far longer than any check needs
DELAY = 0.01


# -- the turn on its own ---------------------------------------------------------------------------
def stored_base() -> MemoryStore:
    store = MemoryStore(ResponsesSettings())
    store.core.put(OWNER, response("r1", answer("m1")), [item("u1")])
    return store


def continuing(store: MemoryStore, **fields) -> StoredTurn:
    """Opened the way a request opens it: its records choose and pin the continued history."""
    records = ResponseRecords(JobManager(ResponsesSettings()), store)
    return asyncio.run(records.open_turn(OWNER, parse(previous_response_id="r1", **fields)))


def nothing_left(store: MemoryStore, *stored_ids: str) -> bool:
    """Nothing pinned: no assembly bytes in flight, and no bytes once the stored responses are gone."""
    for response_id in stored_ids:
        store.core.delete(OWNER, response_id)
    stats = store.stats()
    return (stats["assembly_bytes_in_flight"], stats["bytes"], stats["entries"]) == (0, 0, 0)


def test_leaving_the_block_releases_the_turn():
    store = stored_base()
    with continuing(store) as turn:
        assert store.stats()["assembly_bytes_in_flight"] > 0
        assert [item["id"] for item in turn.history] == ["u1", "m1"]
    assert nothing_left(store, "r1")


def test_a_refusal_inside_the_block_releases_the_turn():
    store = stored_base()
    with pytest.raises(InvalidRequestError):
        with continuing(store):
            raise InvalidRequestError("refused before generation")
    assert nothing_left(store, "r1")


def test_a_turn_that_cannot_open_releases_what_it_pinned():
    store = stored_base()
    duplicate = {"type": "message", "role": "user", "content": "again", "id": "u1"}
    with pytest.raises(InvalidRequestError, match="Duplicate item id"):
        continuing(store, input=[duplicate])
    assert nothing_left(store, "r1")


def test_a_handed_over_turn_is_released_by_its_new_holder_only_once():
    store = stored_base()
    with continuing(store) as turn:
        turn.hand_over()
    pinned = store.stats()["assembly_bytes_in_flight"]
    store.core.delete(OWNER, "r1")
    assert pinned > 0 and store.stats()["bytes"] > 0  # the block left it pinned for the holder
    turn.release()
    turn.release()  # idempotent: a second release must not give back the budget twice
    assert nothing_left(store)


def test_a_turn_has_one_holder():
    store = stored_base()
    with continuing(store) as turn:
        turn.hand_over()
        with pytest.raises(RuntimeError, match="already handed over"):
            turn.hand_over()
        turn.release()
    assert nothing_left(store, "r1")


# -- every path of a request, over HTTP --------------------------------------------------------------
def seeded(start_server, script, **config):
    """A server whose store holds one response (answered "Noted."), and that response's id."""
    server = start_server(["Noted.", *script], delay=DELAY, **config)
    first = server.client().responses.create(model="m", input="Remember 73 " + "z" * 500, store=True)
    return server, first.id


def released(server, *stored_ids: str) -> bool:
    store = server.app.state.store
    if not wait_for(lambda: store.stats()["assembly_bytes_in_flight"] == 0):
        return False
    return nothing_left(store, *stored_ids)


def pinned(server) -> bool:
    return server.app.state.store.stats()["assembly_bytes_in_flight"] > 0


def continuation(previous: str, **fields) -> dict:
    return {"model": "m", "previous_response_id": previous, "input": "and then?", **fields}


def job_generating(server, response_id: str) -> bool:
    """The job has published a few events; the job table is read on the server's loop, which alone changes it."""
    def published() -> int:
        job = server.app.state.jobs.find_local(OWNER, response_id)
        return job.log.last if job is not None else -1

    return server.on_loop(published) > 6


def job_state(server, response_id: str) -> str | None:
    def read() -> str | None:
        job = server.app.state.jobs.find_local(OWNER, response_id)
        return job.state if job is not None else None

    return server.on_loop(read)


def test_refused_before_generation(start_server):
    server, first = seeded(start_server, ["never"])
    with server.http() as http:
        refused = http.post("/v1/responses", json=continuation(first, input="word " * 5000))
    assert refused.status_code == 400, refused.text
    assert server.engine.calls == 1 and released(server, first)


def test_a_background_job_refused_at_admission(start_server):
    server, first = seeded(start_server, ["never"], environ={"MAYA_GLM_RESPONSES_JOB_INPUT_BYTES": "4000"})
    with server.http() as http:
        refused = http.post("/v1/responses", json=continuation(first, input="z" * 5000, background=True, store=True))
    assert refused.status_code == 413, refused.text
    assert server.on_loop(server.app.state.jobs.stats)["records"] == 0 and released(server, first)


def test_a_stream_that_ends(start_server):
    server, first = seeded(start_server, ["fine"])
    with server.http() as http:
        assert read_stream(http, continuation(first, stream=True)).final.status == "completed"
    assert released(server, first)


def test_a_stream_whose_client_leaves(start_server):
    server, first = seeded(start_server, [SLOW])
    with server.http() as http:
        with http.stream("POST", "/v1/responses", json=continuation(first, stream=True)) as answer_:
            lines = answer_.iter_lines()  # keep a reference: a collected iterator closes the response
            frames = iter_frames(lines)
            for _ in range(5):
                next(frames)
            assert pinned(server)
    assert wait_for(lambda: server.engine.cancelled == 1)
    assert released(server, first)


def test_a_stream_cut_by_shutdown(start_server):
    server, first = seeded(start_server, [SLOW])
    with server.http() as http:
        with http.stream("POST", "/v1/responses", json=continuation(first, stream=True)) as answer_:
            lines = answer_.iter_lines()
            frames = iter_frames(lines)
            next(frames)
            assert pinned(server)
            server.stop()
            names = [name for name, _ in frames]
    assert names[-1] == "error" and server.engine.cancelled == 1
    assert released(server, first)


def test_a_json_answer_drained(start_server):
    server, first = seeded(start_server, ["fine"])
    assert server.client().responses.create(**continuation(first)).output_text == "fine"
    assert released(server, first)


def test_a_json_answer_whose_client_leaves(start_server):
    server, first = seeded(start_server, [SLOW])
    with pytest.raises(httpx.TimeoutException):
        httpx.post(server.url + "/v1/responses", json=continuation(first), timeout=0.5)
    assert wait_for(lambda: server.engine.cancelled == 1)
    assert released(server, first)


def test_a_background_job_that_finishes(start_server):
    server, first = seeded(start_server, ["fine"])
    with server.http() as http:
        job = http.post("/v1/responses", json=continuation(first, background=True, store=True)).json()
    assert wait_for(lambda: job_state(server, job["id"]) == "completed")
    assert released(server, first, job["id"])


def test_a_background_job_cancelled_while_running(start_server):
    server, first = seeded(start_server, [SLOW])
    client = server.client()
    job = client.responses.create(**continuation(first, background=True, store=True))
    assert wait_for(lambda: job_generating(server, job.id)) and pinned(server)
    assert client.responses.cancel(job.id).status == "cancelled"
    assert released(server, first)


def test_a_background_job_cancelled_while_queued(start_server):
    server, first = seeded(start_server, [SLOW], environ={"MAYA_GLM_RESPONSES_JOB_WORKERS": "1"})
    client = server.client()
    running = client.responses.create(model="m", input="busy", background=True, store=True)
    queued = client.responses.create(**continuation(first, background=True, store=True))
    assert job_state(server, queued.id) == "queued" and pinned(server)
    assert client.responses.cancel(queued.id).status == "cancelled"
    client.responses.cancel(running.id)
    assert server.engine.calls == 2 and released(server, first)


def test_a_background_job_that_times_out(start_server):
    server, first = seeded(start_server, [SLOW], environ={"MAYA_GLM_RESPONSES_JOB_TIMEOUT_S": "1"})
    job = server.client().responses.create(**continuation(first, background=True, store=True))
    assert wait_for(lambda: job_state(server, job.id) == "failed")
    assert server.on_loop(server.app.state.jobs.stats)["timeouts"] == 1 and released(server, first)


def test_a_background_job_that_fails(start_server):
    server, first = seeded(start_server, [{"text": "one two three four", "fail_after": 2}])
    job = server.client().responses.create(**continuation(first, background=True, store=True))
    assert wait_for(lambda: job_state(server, job.id) == "failed")
    failed = server.client().responses.retrieve(job.id)
    assert failed.error is not None and released(server, first)


def test_a_stored_turn_is_saved_before_its_terminal_event_and_then_released(start_server):
    server, first = seeded(start_server, ["fine"])
    with server.http() as http:
        with http.stream("POST", "/v1/responses", json=continuation(first, stream=True, store=True)) as answer_:
            for name, data in iter_frames(answer_.iter_lines()):
                if name == "response.completed":
                    second = json.loads(data)["response"]["id"]
                    assert http.get(f"/v1/responses/{second}").status_code == 200
    assert released(server, first, second)
