"""Engine admission: a full queue is a 429 before any byte of a stream, the queue's cancel/release
race, and admitted background jobs that wait for the engine instead of failing."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from maya_server.engine.fifo import EngineQueue
from maya_server.errors import RateLimitError

from tests.responses.api.sse import ERROR_KEYS
from tests.server import prometheus_values, wait_for

WORDS = "one two three four five six seven eight nine ten"


# -- the queue on its own -------------------------------------------------------------------
def test_a_release_that_pops_a_cancelled_waiter_leaves_it_cancelled_not_failed():
    """The waiter is cancelled and, before its task runs again, the holder releases: the release
    skips (pops) the cancelled waiter, whose own removal used to raise ValueError."""

    async def scenario():
        queue = EngineQueue(slots=1, max_queue=5)
        holder = queue.slot()
        await holder.__aenter__()

        async def wait_in_line():
            async with queue.slot():
                pytest.fail("a cancelled waiter must never get the slot")

        waiter = asyncio.ensure_future(wait_in_line())
        await asyncio.sleep(0)
        assert queue.waiting == 1
        waiter.cancel()
        await holder.__aexit__(None, None, None)  # synchronous release, before the waiter resumes
        [outcome] = await asyncio.gather(waiter, return_exceptions=True)
        return outcome, queue

    outcome, queue = asyncio.run(scenario())
    assert isinstance(outcome, asyncio.CancelledError), repr(outcome)
    assert queue.busy == 0 and queue.waiting == 0


def test_admission_is_synchronous_and_released_exactly_once():
    async def scenario():
        queue = EngineQueue(slots=1, max_queue=1)
        first = queue.admit()
        second = queue.admit()
        with pytest.raises(RateLimitError) as refused:
            queue.admit()
        unbounded = queue.admit(bounded=False)  # an admitted background job waits beyond max_queue
        first.release()
        first.release()  # idempotent
        await second.wait()
        second.release()
        await unbounded.wait()
        unbounded.release()
        return refused.value, queue

    refused, queue = asyncio.run(scenario())
    assert refused.status == 429 and refused.headers() == {"Retry-After": "1"}
    assert queue.busy == 0 and queue.waiting == 0 and queue.rejected == 1


# -- over HTTP ------------------------------------------------------------------------------
def _stream(url: str, path: str, body: dict) -> tuple[int, dict | None, list[str], dict]:
    """(status, error body, SSE data lines, headers) of one streamed request."""
    with httpx.Client(base_url=url, timeout=60) as http, http.stream("POST", path, json=body) as answer:
        if answer.status_code != 200:
            return answer.status_code, json.loads(answer.read()), [], dict(answer.headers)
        lines = [line[6:] for line in answer.iter_lines() if line.startswith("data: ")]
        return 200, None, lines, dict(answer.headers)


def _complete(path: str, lines: list[str]) -> bool:
    if path == "/v1/chat/completions":
        return lines[-1] == "[DONE]"
    return json.loads(lines[-1])["type"] == "response.completed"


CHAT = ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "stream": True})
RESPONSES = ("/v1/responses", {"input": "hi", "stream": True})


@pytest.mark.parametrize("path, body", [CHAT, RESPONSES])
def test_a_full_queue_refuses_a_stream_with_429_before_it_starts(start_server, path, body):
    server = start_server([WORDS], delay=0.05, max_queue=1)
    with ThreadPoolExecutor(3) as pool:
        running = [pool.submit(_stream, server.url, path, body) for _ in range(2)]
        assert wait_for(lambda: server.app.state.service.queue.waiting == 1)
        status, error, lines, headers = _stream(server.url, path, body)
        results = [f.result() for f in running]
    assert status == 429 and lines == []
    assert set(error["error"]) == ERROR_KEYS and error["error"]["code"] == "queue_full"
    assert headers["retry-after"] == "1"
    assert all(r[0] == 200 and _complete(path, r[2]) for r in results)
    assert server.engine.calls == 2


def test_the_sdk_sees_a_rate_limit_error_for_a_stream(start_server):
    server = start_server([WORDS], delay=0.05, max_queue=1)
    client = server.client()
    with ThreadPoolExecutor(2) as pool:
        running = [pool.submit(lambda: list(client.responses.create(model="m", input="hi", stream=True)))
                   for _ in range(2)]
        assert wait_for(lambda: server.app.state.service.queue.waiting == 1)
        with pytest.raises(openai.RateLimitError):
            client.responses.create(model="m", input="hi", stream=True)
        assert all(events[-1].type == "response.completed" for events in (f.result() for f in running))


def test_fifty_concurrent_streams_against_max_queue_2_are_each_complete_or_a_429(start_server):
    server = start_server([WORDS], delay=0.002, max_queue=2)
    requests = [CHAT if i % 2 else RESPONSES for i in range(50)]
    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(lambda r: (r[0], _stream(server.url, *r)), requests))
    refused = [r for _, r in results if r[0] == 429]
    served = [(path, r) for path, r in results if r[0] == 200]
    assert len(refused) + len(served) == 50 and served and refused
    assert all(_complete(path, r[2]) for path, r in served), "a 200 stream was cut"
    assert all(set(r[1]["error"]) == ERROR_KEYS for r in refused)
    text = server.http().get("/metrics/prometheus").text
    counted = prometheus_values(text, "maya:http_requests_total")
    assert sum(v for k, v in counted.items() if 'status="429"' in k) == len(refused)
    assert sum(v for k, v in counted.items() if 'status="200"' in k and "/v1/" in k) == len(served)
    assert server.app.state.service.queue.describe()["busy"] == 0


def test_an_admitted_background_job_waits_for_a_full_queue_instead_of_failing(start_server):
    server = start_server([WORDS], delay=0.05, max_queue=1)
    client = server.client()
    with ThreadPoolExecutor(2) as pool:
        running = [pool.submit(_stream, server.url, *CHAT) for _ in range(2)]
        assert wait_for(lambda: server.app.state.service.queue.waiting == 1)
        job = client.responses.create(model="m", input="hi", background=True, store=True)
        assert job.status == "queued"
        assert wait_for(lambda: client.responses.retrieve(job.id).status not in ("queued", "in_progress"), 30)
        assert all(f.result()[0] == 200 for f in running)
    final = client.responses.retrieve(job.id)
    assert final.status == "completed", final.error
    assert final.output_text == WORDS
