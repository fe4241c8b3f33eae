"""The recorder's check fails on what a client must not get: it is not a check that always passes."""

from __future__ import annotations

import orjson
import pytest

from tests.recorder import Exchange, Recorder


def recorded(status: int, content_type: str, body: bytes, path: str = "/v1/responses") -> Recorder:
    recorder = Recorder()
    recorder.exchanges.append(Exchange("POST", path, status, content_type, bytearray(body)))
    return recorder


def test_valid_answers_pass(start_server):
    server = start_server(["Hello!"])
    recorder = Recorder()
    with server.http() as http:
        body = http.post("/v1/responses", json={"model": "m", "input": "hi"}).content
        stream = http.post("/v1/responses", json={"model": "m", "input": "hi", "stream": True}).content
    recorder.exchanges += [Exchange("POST", "/v1/responses", 200, "application/json", bytearray(body)),
                           Exchange("POST", "/v1/responses", 200, "text/event-stream", bytearray(stream))]
    assert recorder.check() > 2


def test_a_response_missing_a_field_the_schema_requires_fails(start_server):
    server = start_server(["Hello!"])
    with server.http() as http:
        body = http.post("/v1/responses", json={"model": "m", "input": "hi"}).json()
    del body["presence_penalty"]
    with pytest.raises(AssertionError, match="presence_penalty"):
        recorded(200, "application/json", orjson.dumps(body)).check()


def test_an_unknown_event_type_fails():
    frame = b'event: response.made_up\ndata: {"type":"response.made_up","sequence_number":0}\n\n'
    with pytest.raises(AssertionError, match="response.made_up"):
        recorded(200, "text/event-stream", frame).check()


def test_an_error_not_in_openai_shape_fails():
    with pytest.raises(AssertionError):
        recorded(400, "application/json", b'{"detail": "bad"}').check()
