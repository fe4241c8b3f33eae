"""A `store:true` response whose save finds Redis gone (issue 48): the replica let the request in while Redis
answered, generated it, and Redis was killed before the save. Nothing of a JSON answer was sent yet, so it
is the 503 `store_unavailable` that the requests after it get before generating (the OpenAI SDKs retry it),
not a 200 whose status is `failed`. A stream has begun: it ends with `error` and `response.failed`.

A real redis-server of the test's own (killed with SIGKILL), a server over the gated engine: the generation
is held while Redis is killed, so no request or background loop of the replica can notice first."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.gated_engine import GatedEngine, serving
from tests.redis_server import RedisServer
from tests.responses.api.sse import iter_frames
from tests.responses.store_backends import unique_prefix

WAIT_S = 30
"""The longest a test waits for the held generation or for an answer."""


def config(redis: RedisServer) -> dict:
    return {"store": redis.url, "store_prefix": unique_prefix(), "store_command_timeout": 0.5,
            "store_connect_timeout": 0.5}


def post(server, body: dict) -> httpx.Response:
    with server.http() as http:
        return http.post("/v1/responses", json=body)


def stream(server, body: dict) -> list[dict]:
    with server.http() as http, http.stream("POST", "/v1/responses", json={**body, "stream": True}) as answer:
        assert answer.status_code == 200, answer.read().decode()
        return [json.loads(data) for _, data in iter_frames(answer.iter_lines(), WAIT_S)]


def killed_while_generating(server, engine: GatedEngine, redis: RedisServer, send):
    """`send(server)`'s answer, Redis killed while its generation is held."""
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(send, server)
        assert engine.holding.wait(WAIT_S), "the generation did not start"
        redis.kill()
        server.on_loop(engine.released.set)
        return pending.result(timeout=WAIT_S)


def test_a_non_streamed_create_whose_save_finds_redis_gone_is_a_503_store_unavailable(tmp_path):
    redis = RedisServer(tmp_path)
    engine = GatedEngine(["Hello there, friend."], hold_after=1)
    body = {"model": "m", "input": "hi", "store": True}
    try:
        with serving(engine, **config(redis)) as server:
            first = killed_while_generating(server, engine, redis, lambda s: post(s, body))
            later = post(server, body)  # refused before generating: the replica knows Redis is gone
            unstored = post(server, {**body, "store": False})
    finally:
        redis.stop()
    assert first.status_code == 503, first.text
    error = first.json()["error"]
    assert error["code"] == "store_unavailable" and error["type"] == "server_error" and error["param"] is None
    assert later.status_code == 503 and later.json() == first.json()  # the same answer, before or after noticing
    assert engine.calls == 2 and unstored.status_code == 200 and unstored.json()["status"] == "completed"


def test_a_streamed_create_whose_save_finds_redis_gone_ends_with_error_and_response_failed(tmp_path):
    redis = RedisServer(tmp_path)
    engine = GatedEngine(["Hello there, friend."], hold_after=1)
    try:
        with serving(engine, **config(redis)) as server:
            events = killed_while_generating(server, engine, redis,
                                             lambda s: stream(s, {"model": "m", "input": "hi", "store": True}))
    finally:
        redis.stop()
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert [event["type"] for event in events[:2]] == ["response.created", "response.in_progress"]
    assert [event["type"] for event in events[-2:]] == ["error", "response.failed"]
    assert events[-2]["code"] == "store_unavailable"
    failed = events[-1]["response"]
    assert failed["status"] == "failed" and failed["error"]["code"] == "server_error"
    text = "".join(event["delta"] for event in events if event["type"] == "response.output_text.delta")
    assert text == "Hello there, friend."  # everything generated was sent before the save failed
