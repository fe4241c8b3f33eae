"""The server's JSON, exactly as sent, against the SDK's own types."""

from __future__ import annotations

import httpx
import pytest
from openai.types.responses import Response

from tests.responses.api.sse import EVENT_CLASSES, STREAM_EVENT, iter_frames, no_unknown_fields


def raw_events(server, body: dict) -> list[dict]:
    with server.http() as http, http.stream("POST", "/v1/responses", json={**body, "stream": True}) as answer:
        return [httpx.Response(200, content=data).json() for _, data in iter_frames(answer.iter_lines())]


def test_every_event_without_usage_or_error_validates_as_sent(start_server):
    server = start_server(["<think>Thinking it over.</think>Hello there."])
    events = raw_events(server, {"model": "m", "input": "hi"})
    checked = 0
    for raw in events:
        if raw["type"] in ("response.completed", "response.failed", "response.incomplete"):
            continue
        event = STREAM_EVENT.validate_python(raw)
        assert type(event) is EVENT_CLASSES[raw["type"]]
        no_unknown_fields(event)
        checked += 1
    assert checked == len(events) - 1


def test_usage_has_every_field_the_sdk_requires(start_server):
    server = start_server(["Hello there."])
    with server.http() as http:
        raw = http.post("/v1/responses", json={"model": "m", "input": "hi"}).json()
    Response.model_validate(raw)


@pytest.mark.parametrize(
    "body, script",
    [
        ({}, {"text": "one two three", "fail_after": 1}),
        ({"text": {"format": {"type": "json_object"}}}, "not json"),
    ],
    ids=["engine failure", "invalid structured output"],
)
def test_a_failed_response_error_code_is_one_the_sdk_knows(start_server, body, script):
    server = start_server([script])
    raw = raw_events(server, {"model": "m", "input": "hi", **body})[-1]
    assert raw["type"] == "response.failed"
    Response.model_validate(raw["response"])


def test_the_sdk_stream_yields_the_error_event_and_response_failed(start_server):
    """The SDK raises on any stream event carrying an `error` key; Maya's `error` event has none, so the
    SDK's users see `error` then `response.failed` (the Open Responses nested shape would hide both)."""
    server = start_server([{"text": "one two three four", "fail_after": 2}])
    events = list(server.client().responses.create(model="m", input="hi", stream=True))
    assert [e.type for e in events[-2:]] == ["error", "response.failed"]
    assert events[-2].code == "engine_error" and events[-1].response.status == "failed"
