"""While output is held for validation, the stream is never silent for long: SSE comment lines keep it alive.

A held structured answer (or strict tool call) publishes nothing until the whole
generation is validated; without keep-alives a client with a read timeout would give up.
The engine here is held mid-generation by an event the test controls and released only
once the test has read several keep-alives: the hold lasts as long as the test needs, so
a slow machine changes how long the test takes, never what it sees.
"""

from __future__ import annotations

import json

import pytest

from tests.gated_engine import GatedEngine, serving
from tests.responses.api.test_structured_output import JSON_SCHEMA, VALID
from tests.server import wait_for

INTERVAL = 0.05
KEEPALIVES = 3
"""Keep-alives read before the engine is released: more than one, so they repeat during the hold."""


def read_lines_releasing(server, engine: GatedEngine, path: str, body: dict) -> tuple[list[str], int]:
    """Every non-empty SSE line of a streamed answer, and how many had arrived when the engine was released
    (after the KEEPALIVES-th comment line). A stream that sent no keep-alive would never be released and
    end in the client's read timeout."""
    lines, released_after = [], -1
    with server.http() as http, http.stream("POST", path, json={**body, "stream": True}) as answer:
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if not line:
                continue
            lines.append(line)
            if released_after < 0 and sum(seen.startswith(":") for seen in lines) == KEEPALIVES:
                released_after = len(lines)
                server.on_loop(engine.released.set)
    return lines, released_after


def generated_text(line: str) -> str:
    """The model's text an SSE line carries (a Responses text delta, a Chat content delta), else ''."""
    if not line.startswith("data: {"):
        return ""
    data = json.loads(line[6:])
    if data.get("type") == "response.output_text.delta":
        return data["delta"]
    choices = data.get("choices") or [{}]
    return (choices[0].get("delta") or {}).get("content") or ""


def assert_held_then_released(lines: list[str], released_after: int) -> None:
    comments = [i for i, line in enumerate(lines) if line.startswith(":")]
    content = [i for i, line in enumerate(lines) if generated_text(line)]
    assert released_after > 0, f"the engine was never released: fewer than {KEEPALIVES} keep-alives"
    assert content and min(content) >= released_after, "no content while the engine was held"
    assert max(comments) < min(content), "keep-alives come while held, content after release"


SCHEMA_FORMAT = {k: v for k, v in JSON_SCHEMA["format"].items() if k != "type"}
BODIES = {
    "/v1/responses": {"model": "m", "input": "count", "text": JSON_SCHEMA},
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "count"}],
                             "response_format": {"type": "json_schema", "json_schema": SCHEMA_FORMAT}},
}


@pytest.mark.parametrize("path", list(BODIES))
def test_a_held_answer_sends_keepalives_until_it_is_released(path):
    engine = GatedEngine([VALID], hold_after=1)
    with serving(engine, keepalive_s=INTERVAL) as server:
        lines, released_after = read_lines_releasing(server, engine, path, BODIES[path])
    assert_held_then_released(lines, released_after)
    assert "".join(generated_text(line) for line in lines) == VALID


def test_an_unheld_stream_sends_no_keepalives(start_server):
    """Each token comes later than the keep-alive interval: a stream that were kept alive would show comments.
    (Load only makes the tokens later still, so this cannot fail for being slow.)"""
    server = start_server(["one two three"], delay=8 * INTERVAL, keepalive_s=INTERVAL)
    with server.http() as http, http.stream("POST", "/v1/responses",
                                            json={"model": "m", "input": "count", "stream": True}) as answer:
        lines = [line for line in answer.iter_lines() if line]
    assert any("response.completed" in line for line in lines)
    assert not any(line.startswith(":") for line in lines)


@pytest.mark.parametrize("path", list(BODIES))
def test_leaving_during_the_hold_stops_the_engine(path):
    engine = GatedEngine(['{"fruit": "apple", "count": 3}'], hold_after=1)  # never released
    with serving(engine, keepalive_s=INTERVAL) as server:
        with server.http() as http, http.stream("POST", path, json={**BODIES[path], "stream": True}) as answer:
            lines = answer.iter_lines()  # keep a reference: a collected iterator closes the response
            while not next(lines).startswith(":"):
                pass  # read until the first keep-alive, then hang up mid-hold
            assert engine.holding.wait(timeout=10)  # the generation is under way (not still being admitted)
        assert wait_for(lambda: server.engine.cancelled == 1)
        assert wait_for(lambda: server.app.state.service.queue.busy == 0)
    assert engine.holding.is_set() and not engine.released.is_set()


def test_a_background_reader_gets_keepalives_while_the_task_holds_its_answer():
    engine = GatedEngine([VALID], hold_after=1)
    with serving(engine, keepalive_s=INTERVAL) as server:
        body = {**BODIES["/v1/responses"], "background": True, "store": True}
        lines, released_after = read_lines_releasing(server, engine, "/v1/responses", body)
    assert_held_then_released(lines, released_after)
    assert lines[-1].startswith("data: ") and '"response.completed"' in lines[-1]
