"""A `store: true` response that did not finish is not stored (the contract), and asking for it says why: not the
general "only responses created with store: true are kept", which tells a client that did set it to set it."""

from __future__ import annotations

import json

from tests.responses.api.sse import iter_frames, read_stream
from tests.responses.api.test_background import DELAY, SLOW, background, wait_status
from tests.server import wait_for

GENERAL_HINT = 'Only responses created with "store": true are kept'


def error_of(answer) -> dict:
    assert answer.status_code == 404, answer.text
    return answer.json()["error"]


def test_a_failed_stored_response_is_a_404_that_says_it_failed(start_server):
    server = start_server([{"text": "one two three four", "fail_after": 2}, "ok"])
    with server.http() as http:
        failed = read_stream(http, {"model": "m", "input": "hi", "store": True}).final
        assert failed.status == "failed"
        for path in (f"/v1/responses/{failed.id}", f"/v1/responses/{failed.id}/input_items"):
            error = error_of(http.get(path))
            assert error["code"] == "not_found" and error["param"] is None
            assert "it failed" in error["message"] and GENERAL_HINT not in error["message"], error["message"]
        error = error_of(http.post("/v1/responses", json={"model": "m", "input": "and?", "previous_response_id": failed.id}))
        assert error["param"] == "previous_response_id"
        assert "it failed" in error["message"] and GENERAL_HINT not in error["message"], error["message"]
    assert server.engine.calls == 1  # the continuation was refused before the engine
    assert server.app.state.store.stats()["writes"] == 0  # still not stored


def test_a_stored_stream_whose_client_left_says_so(start_server):
    server = start_server(["tick " * 400], delay=0.01)
    with server.http() as http:
        with http.stream("POST", "/v1/responses", json={"model": "m", "input": "go", "stream": True,
                                                        "store": True}) as answer:
            lines = answer.iter_lines()
            frames = iter_frames(lines)
            response_id = json.loads(next(frames)[1])["response"]["id"]
            for _ in range(5):
                next(frames)
        assert wait_for(lambda: server.engine.cancelled == 1)
        assert wait_for(lambda: http.get(f"/v1/responses/{response_id}").status_code == 404)
        message = error_of(http.get(f"/v1/responses/{response_id}"))["message"]
    assert "disconnected before it finished" in message and GENERAL_HINT not in message, message


def test_another_key_learns_nothing_about_a_failed_response(start_server):
    server = start_server([{"text": "one two three four", "fail_after": 2}], api_keys=("key-one", "key-two"))
    with server.http(headers={"Authorization": "Bearer key-one"}) as mine:
        failed = read_stream(mine, {"model": "m", "input": "hi", "store": True}).final
    with server.http(headers={"Authorization": "Bearer key-two"}) as theirs:
        message = error_of(theirs.get(f"/v1/responses/{failed.id}"))["message"]
    assert GENERAL_HINT in message and "failed" not in message  # exactly an unknown id's answer


def test_a_response_not_stored_because_store_was_false_keeps_the_general_hint(start_server):
    server = start_server(["ok"])
    with server.http() as http:
        done = read_stream(http, {"model": "m", "input": "hi"}).final
        message = error_of(http.get(f"/v1/responses/{done.id}"))["message"]
    assert GENERAL_HINT in message


def test_status_counts_the_remembered_ids(start_server):
    server = start_server([{"text": "one two three four", "fail_after": 2}])
    with server.http() as http:
        read_stream(http, {"model": "m", "input": "hi", "store": True})
        unstored = http.get("/v1/status").json()["responses"]["unstored"]
    assert unstored["entries"] == 1 and unstored["limit"] == 4096 and unstored["noted"] == 1


def test_a_cancelled_background_response_says_so_once_its_record_expired(start_server):
    now = [1000.0]
    server = start_server([SLOW], delay=DELAY, clock=lambda: now[0], environ={"MAYA_GLM_RESPONSES_JOB_TTL_S": "60"})
    client = server.client()
    job = background(client)
    assert client.responses.cancel(job.id).status in ("cancelled", "in_progress")
    assert wait_status(server, job.id, "cancelled")
    now[0] += 61  # the task's record has expired: only the memory of unsaved responses knows the id
    with server.http() as http:
        message = error_of(http.get(f"/v1/responses/{job.id}"))["message"]
        continued = error_of(http.post("/v1/responses", json={"model": "m", "input": "and?",
                                                              "previous_response_id": job.id}))
    assert "it was cancelled" in message and GENERAL_HINT not in message, message
    assert continued["param"] == "previous_response_id" and "it was cancelled" in continued["message"]
