"""While output is held for validation, the stream is never silent for long: SSE comment lines keep it alive.

A held structured answer (or strict tool call) publishes nothing until the whole
generation is validated; without keep-alives a client with a read timeout would give up.
The scripted engine's per-token delay makes the hold last ~2 s, with a 0.25 s interval.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.responses.api.test_structured_output import JSON_SCHEMA, VALID
from tests.server import wait_for

INTERVAL = 0.25
DELAY = 0.4
"""Seconds per scripted token: VALID is 5 tokens, a ~2 s hold."""


def read_lines(server, path: str, body: dict) -> list[tuple[float, str]]:
    """Every non-empty SSE line of a streamed answer, with when it arrived."""
    lines = []
    with server.http() as http, http.stream("POST", path, json={**body, "stream": True}) as answer:
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if line:
                lines.append((time.monotonic(), line))
    return lines


def longest_silence(lines: list[tuple[float, str]]) -> float:
    return max(b[0] - a[0] for a, b in zip(lines, lines[1:]))


SCHEMA_FORMAT = {k: v for k, v in JSON_SCHEMA["format"].items() if k != "type"}
BODIES = {
    "/v1/responses": {"model": "m", "input": "count", "text": JSON_SCHEMA},
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "count"}],
                             "response_format": {"type": "json_schema", "json_schema": SCHEMA_FORMAT}},
}


@pytest.mark.parametrize("path", list(BODIES))
def test_a_held_answer_sends_keepalives_until_it_is_released(start_server, path):
    server = start_server([VALID], delay=DELAY, keepalive_s=INTERVAL)
    lines = read_lines(server, path, BODIES[path])
    comments = [i for i, (_, line) in enumerate(lines) if line.startswith(":")]
    content = [i for i, (_, line) in enumerate(lines) if '"delta"' in line and "apple" in line]
    assert len(comments) >= 4, lines
    assert content and max(comments) < min(content), "keep-alives come while held, content after release"
    assert longest_silence(lines) < 4 * INTERVAL  # the hold itself lasts ~8 intervals
    texts = [json.loads(line[6:]) for _, line in lines if line.startswith("data: {")]
    joined = "".join(t.get("delta", "") for t in texts if t.get("type") == "response.output_text.delta") or "".join(
        (t["choices"][0]["delta"].get("content") or "") for t in texts if t.get("choices"))
    assert joined == VALID


def test_an_unheld_stream_sends_no_keepalives(start_server):
    server = start_server(["one two three"], delay=DELAY, keepalive_s=INTERVAL)
    lines = read_lines(server, "/v1/responses", {"model": "m", "input": "count"})
    assert not any(line.startswith(":") for _, line in lines)


@pytest.mark.parametrize("path", list(BODIES))
def test_leaving_during_the_hold_stops_the_engine(start_server, path):
    server = start_server(['{"fruit": "' + "a " * 400 + '", "count": 3}'], delay=0.01, keepalive_s=0.05)
    with server.http() as http, http.stream("POST", path, json={**BODIES[path], "stream": True}) as answer:
        lines = answer.iter_lines()  # keep a reference: a collected iterator closes the response
        while not next(lines).startswith(":"):
            pass  # read until the first keep-alive, then hang up mid-hold
    assert wait_for(lambda: server.engine.cancelled == 1)
    assert wait_for(lambda: server.app.state.service.queue.busy == 0)


def test_a_background_reader_gets_keepalives_while_the_task_holds_its_answer(start_server):
    server = start_server([VALID], delay=DELAY, keepalive_s=INTERVAL)
    body = {**BODIES["/v1/responses"], "background": True, "store": True}
    lines = read_lines(server, "/v1/responses", body)
    comments = [i for i, (_, line) in enumerate(lines) if line.startswith(":")]
    assert len(comments) >= 4
    assert longest_silence(lines) < 4 * INTERVAL
    assert lines[-1][1].startswith("data: ") and '"response.completed"' in lines[-1][1]
