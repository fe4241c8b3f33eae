"""A request's image work ends with the request: a client that leaves while its images are fetched
cancels the fetches at once (the image server sees its connection closed, the fetch gauge drops to 0,
the engine queue's place is given back), a shutdown cancels them too, and image work takes its place
in the engine queue before anything is fetched (a full queue is a 429 with no fetch made)."""

from __future__ import annotations

import threading

import httpx
import pytest

from maya_server.http.shutdown import SHUTDOWN_CODE

from tests.server import prometheus_values, wait_for
from tests.images.test_loader import Stalling


@pytest.fixture
def stalling():
    server = Stalling()
    yield server
    server.httpd.shutdown()


def vision_server(start_server, **config):
    server = start_server(["A picture."], image_allow_private=True, **config)
    server.engine.accepts_images = True  # the scripted engine, standing in for a vision engine
    return server


def chat_body(url: str) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": url}}]}]}


def responses_body(url: str) -> dict:
    return {"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": url}]}]}


def gauges(server) -> dict[str, float]:
    with server.http() as http:
        return prometheus_values(http.get("/metrics/prometheus").text, "maya:")


@pytest.mark.parametrize("path, body", [("/v1/chat/completions", chat_body), ("/v1/responses", responses_body)])
def test_a_client_that_leaves_cancels_its_fetches_at_once(start_server, stalling, path, body):
    server = vision_server(start_server)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + path, json=body(stalling.url), timeout=httpx.Timeout(30, read=1.0))
    assert stalling.requested.is_set()
    assert stalling.closed.wait(5), "the fetch outlived its client"
    assert wait_for(lambda: gauges(server)["maya:image_fetches"] == 0)
    assert wait_for(lambda: server.app.state.service.queue.busy == 0)  # the admission went with it
    assert gauges(server)["maya:image_memory_bytes"] == 0
    assert server.engine.calls == 0


def test_a_shutdown_cancels_the_fetches_and_answers_503(start_server, stalling):
    server = vision_server(start_server)
    answers = []
    client = threading.Thread(target=lambda: answers.append(
        httpx.post(server.url + "/v1/chat/completions", json=chat_body(stalling.url), timeout=30)))
    client.start()
    assert stalling.requested.wait(10)
    server.stop()
    client.join(10)
    assert stalling.closed.wait(5)
    # a 503 is the shutdown's answer: a fetch left to its deadline answers 400, one cut at the grace period's end
    # answers nothing
    assert answers and answers[0].status_code == 503
    assert answers[0].json()["error"]["code"] == SHUTDOWN_CODE


def test_image_work_waits_in_the_engine_queue_like_the_rest_and_a_full_queue_fetches_nothing(start_server, stalling):
    server = vision_server(start_server, max_queue=1)
    def leave_after_3s() -> None:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(server.url + "/v1/chat/completions", json=chat_body(stalling.url),
                       timeout=httpx.Timeout(30, read=3))

    leaving = [threading.Thread(target=leave_after_3s) for _ in range(2)]
    for thread in leaving:
        thread.start()
    assert wait_for(lambda: stalling.connections == 2)  # one holds the slot, one waits: both load their images
    with server.http() as http:
        full = http.post("/v1/chat/completions", json=chat_body(stalling.url))
    assert full.status_code == 429 and full.json()["error"]["code"] == "queue_full"
    assert stalling.connections == 2  # refused before its image was fetched
    for thread in leaving:
        thread.join()
    assert wait_for(lambda: server.app.state.service.queue.busy == 0 and server.app.state.service.queue.waiting == 0)
