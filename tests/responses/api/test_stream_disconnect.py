"""A foreground client that goes away stops its generation and frees the engine."""

from __future__ import annotations

import httpx

from tests.server import wait_for

from tests.responses.api.sse import iter_frames


def test_streaming_disconnect_stops_generation(start_server):
    server = start_server(["tick " * 400], delay=0.01)
    queue = server.app.state.service.queue
    with server.http() as http:
        with http.stream("POST", "/v1/responses", json={"model": "m", "input": "go", "stream": True}) as answer:
            lines = answer.iter_lines()  # keep a reference: a collected iterator closes the response
            frames = iter_frames(lines)
            seen = [next(frames)[0] for _ in range(6)]
    assert seen[:2] == ["response.created", "response.in_progress"]
    assert "response.output_text.delta" in seen
    assert wait_for(lambda: server.engine.cancelled == 1)
    assert wait_for(lambda: queue.busy == 0)
    assert server.engine.calls == 1
    server.engine.set_script(["done"])
    after = server.client().responses.create(model="m", input="again")
    assert after.output_text == "done"


def test_non_streaming_disconnect_stops_generation(start_server):
    server = start_server(["tick " * 400], delay=0.01)
    try:
        httpx.post(server.url + "/v1/responses", json={"model": "m", "input": "go"}, timeout=0.3)
    except httpx.TimeoutException:
        pass
    assert wait_for(lambda: server.engine.cancelled == 1)
    assert wait_for(lambda: server.app.state.service.queue.busy == 0)
