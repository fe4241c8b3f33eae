"""Read `/v1/responses` answers raw and hold them to the OpenAI SDK's own types.

The SDK's client builds its models without validating them, so these helpers
read the bytes with httpx and validate every SSE event with
`TypeAdapter(ResponseStreamEvent)` and every response object with
`Response.model_validate`; a field the SDK does not know is an error too. Each
is also validated against the Open Responses schema (`tests/open_responses`).
`read_stream` then checks what a conforming stream promises: sequence numbers
0..n-1, created → in_progress → … → one terminal event, each item added before
its deltas and done after them, joined deltas equal to the done text/arguments,
item ids and output indexes that agree with each other and with the final
object.
"""

from __future__ import annotations

import time
import typing
from dataclasses import dataclass
from typing import Any

import httpx
from openai.types.responses import (
    Response, ResponseFunctionCallArgumentsDoneEvent, ResponseStreamEvent,
)
from pydantic import BaseModel, TypeAdapter

from tests.open_responses.validate import check_response_object, check_stream_event

STREAM_EVENT = TypeAdapter(ResponseStreamEvent)
EVENT_CLASSES = {
    typing.get_args(cls.model_fields["type"].annotation)[0]: cls
    for cls in typing.get_args(typing.get_args(ResponseStreamEvent)[0])
}
TERMINAL = ("response.completed", "response.incomplete", "response.failed")
DELTA_TYPES = (
    "response.output_text.delta",
    "response.reasoning_text.delta",
    "response.function_call_arguments.delta",
)
ERROR_KEYS = {"message", "type", "param", "code"}


@dataclass
class StreamResult:
    events: list[Any]
    raw: list[dict]

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def shape(self) -> list[str]:
        """The event types with each run of one delta type written once, as `type*`."""
        out: list[str] = []
        for kind in self.types:
            entry = kind + "*" if kind in DELTA_TYPES else kind
            if not (out and out[-1] == entry and kind in DELTA_TYPES):
                out.append(entry)
        return out

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]

    def index(self, kind: str) -> int:
        return self.types.index(kind)

    @property
    def final(self) -> Response:
        return self.events[-1].response


KNOWN_EXTRAS = {
    Response: {"store", "presence_penalty", "frequency_penalty"},
    ResponseFunctionCallArgumentsDoneEvent: {"name"},
}
"""Fields OpenAI's API (or the Open Responses schema, which requires them) sends that this SDK version's
types do not declare."""


def no_unknown_fields(model: Any, where: str = "") -> None:
    """Every field the server sent is one the SDK declares (its models allow extras silently)."""
    if isinstance(model, BaseModel):
        extra = set(model.model_extra or ()) - KNOWN_EXTRAS.get(type(model), set())
        assert not extra, f"fields unknown to the SDK at {where or type(model).__name__}: {sorted(extra)}"
        for name in type(model).model_fields:
            no_unknown_fields(getattr(model, name), f"{where}.{name}")
    elif isinstance(model, (list, tuple)):
        for i, item in enumerate(model):
            no_unknown_fields(item, f"{where}[{i}]")


def validate_response(data: dict) -> Response:
    """`data` as the SDK's `Response` (every field known), valid for the Open Responses schema too,
    and consistent (`check_response`)."""
    response = validate_response_types(data)
    check_response(response)
    return response


def validate_response_types(data: dict) -> Response:
    """`data` as the SDK's `Response` (every field known), valid for the Open Responses schema too."""
    check_response_object(data)
    response = Response.model_validate(data)
    no_unknown_fields(response, "response")
    return response


def check_response(response: Response) -> None:
    """What holds for every response object, in progress or final."""
    ids = [item.id for item in response.output]
    assert len(set(ids)) == len(ids), f"duplicate output item ids: {ids}"
    if response.status in ("completed", "incomplete", "failed"):
        assert response.usage is not None, "a finished response reports its usage"
        usage = response.usage
        assert usage.total_tokens == usage.input_tokens + usage.output_tokens
        assert 0 <= usage.input_tokens_details.cached_tokens <= usage.input_tokens
        assert 0 <= usage.output_tokens_details.reasoning_tokens <= usage.output_tokens
        if response.status == "completed":
            assert response.completed_at is not None
        for item in response.output:
            assert item.status != "in_progress", f"{item.type} {item.id} is still in_progress in a {response.status} response"
    if response.status == "failed":
        assert response.error is not None and response.error.message
    else:
        assert response.error is None
    if response.status == "incomplete":
        assert response.incomplete_details is not None
    else:
        assert response.incomplete_details is None


def validate_event(raw: dict) -> Any:
    """`raw` as the SDK's stream event of its type (every field known), valid for the Open Responses schema too."""
    assert raw.get("type") in EVENT_CLASSES, f"not an SDK stream event type: {raw.get('type')!r}"
    EVENT_CLASSES[raw["type"]].model_validate(raw)  # readable errors for the one type it claims
    check_stream_event(raw)
    event = STREAM_EVENT.validate_python(raw)
    assert type(event) is EVENT_CLASSES[raw["type"]]
    no_unknown_fields(event, event.type)
    return event


def post_json(http: httpx.Client, body: dict) -> tuple[Response, dict]:
    """A non-streaming create: (validated Response, raw JSON)."""
    answer = http.post("/v1/responses", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    raw = answer.json()
    return validate_response(raw), raw


def post_error(http: httpx.Client, body: dict, *, status: int = 400) -> dict:
    """The OpenAI error body of a refused request: {"error": {message, type, param, code}}."""
    answer = http.post("/v1/responses", json=body)
    assert answer.status_code == status, answer.text
    data = answer.json()
    assert set(data) == {"error"}, data
    error = data["error"]
    assert set(error) == ERROR_KEYS, error
    assert isinstance(error["message"], str) and error["message"]
    if status == 400:
        assert error["type"] == "invalid_request_error"
    return error


STREAM_S = 120.0
"""The longest a test follows one stream. A background task's reader gets a keep-alive comment every few
seconds, so a stream that never ends (a log whose writer died) would never hit the client's read timeout:
this fails the test instead, and before the suite's per-test timeout."""


def iter_frames(lines, timeout: float = STREAM_S) -> Any:
    """(event name, data text) for each SSE frame of an iterator of lines; the test fails when the stream has
    not ended after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    name, data = None, []
    for line in lines:
        assert time.monotonic() < deadline, f"the stream did not end within {timeout:.0f} s"
        if line == "":
            if data:
                yield name, "\n".join(data)
            name, data = None, []
        elif line.startswith("event:"):
            name = line[len("event:"):].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:"):].lstrip(" "))
        else:
            assert line.startswith(":"), f"not an SSE line: {line!r}"
    if data:
        yield name, "\n".join(data)


def read_stream(http: httpx.Client, body: dict, *, check: bool = True) -> StreamResult:
    """POST a streaming create, validate every event, then (unless `check` is false) the stream's invariants."""
    result = StreamResult([], [])
    with http.stream("POST", "/v1/responses", json={**body, "stream": True}) as answer:
        assert answer.status_code == 200, answer.read().decode()
        assert answer.headers["content-type"].startswith("text/event-stream")
        for name, data in iter_frames(answer.iter_lines()):
            assert data != "[DONE]", "the Responses stream has no [DONE] sentinel"
            raw = httpx.Response(200, content=data).json()
            assert name == raw.get("type"), f"event line {name!r} but data type {raw.get('type')!r}"
            result.raw.append(raw)
            result.events.append(validate_event(raw))
    if check:
        check_stream(result)
    return result


def check_stream(result: StreamResult) -> None:
    events = result.events
    assert [e.sequence_number for e in events] == list(range(len(events))), "sequence numbers must run 0..n-1"
    assert result.types[:2] == ["response.created", "response.in_progress"], result.types[:3]
    terminals = [i for i, kind in enumerate(result.types) if kind in TERMINAL]
    assert terminals == [len(events) - 1], f"exactly one terminal event, last: {result.types}"
    final = result.final
    check_response(final)
    for opening in events[:2]:
        assert opening.response.id == final.id
        assert opening.response.status == "in_progress" and opening.response.output == []
        assert opening.response.usage is None
    assert final.status == result.types[-1].removeprefix("response.")
    if final.status == "failed":
        assert result.types[-2] == "error", "a failed stream sends `error` before response.failed"
        error = events[-2]
        assert error.message == final.error.message
    else:
        assert "error" not in result.types
    _check_items(events[2:-1], final)


class _ItemTrack:
    def __init__(self, index: int, item: Any) -> None:
        self.index = index
        self.item = item
        self.parts: dict[int, dict] = {}
        self.deltas: list[str] = []
        self.args_done: str | None = None
        self.done: Any = None


def _check_items(events: list[Any], final: Response) -> None:
    items: list[_ItemTrack] = []
    by_id: dict[str, _ItemTrack] = {}
    for event in events:
        kind = event.type
        if kind == "error":
            continue
        if kind == "response.output_item.added":
            assert event.output_index == len(items), "output_index counts items in the order they are added"
            assert event.item.id not in by_id
            assert event.item.status == "in_progress"
            track = _ItemTrack(event.output_index, event.item)
            items.append(track)
            by_id[event.item.id] = track
            continue
        track = by_id.get(event.item.id if kind == "response.output_item.done" else event.item_id)
        assert track is not None, f"{kind} for an item never added"
        assert track.done is None, f"{kind} after the item's output_item.done"
        assert event.output_index == track.index, f"{kind}: output_index {event.output_index} != {track.index}"
        if kind == "response.output_item.done":
            _close_item(track, event.item)
        elif kind in ("response.content_part.added", "response.content_part.done"):
            _content_part(track, event)
        elif kind in ("response.output_text.delta", "response.reasoning_text.delta"):
            assert track.parts.get(event.content_index, {}).get("state") == "open", f"{kind} outside an open part"
            track.parts[event.content_index]["deltas"].append(event.delta)
        elif kind in ("response.output_text.done", "response.reasoning_text.done"):
            part = track.parts[event.content_index]
            assert part["state"] == "open"
            assert "".join(part["deltas"]) == event.text, "joined deltas != done text"
            part["state"], part["text"] = "text-done", event.text
        elif kind == "response.function_call_arguments.delta":
            assert track.item.type == "function_call" and track.args_done is None
            track.deltas.append(event.delta)
        elif kind == "response.function_call_arguments.done":
            assert track.item.type == "function_call" and track.args_done is None
            assert "".join(track.deltas) == event.arguments, "joined argument deltas != done arguments"
            assert event.model_extra["name"] == track.item.name
            track.args_done = event.arguments
        else:
            raise AssertionError(f"unexpected event inside the stream: {kind}")
    assert [t.item.id for t in items] == [item.id for item in final.output], "final output != added items"
    for track, item in zip(items, final.output):
        assert track.done is not None, f"{track.item.type} {track.item.id} was added but never done"
        assert track.done.model_dump() == item.model_dump(), f"output_item.done != final output[{track.index}]"


def _content_part(track: _ItemTrack, event: Any) -> None:
    assert track.item.type in ("message", "reasoning")
    if event.type == "response.content_part.added":
        assert event.content_index == len(track.parts)
        assert getattr(event.part, "text", None) == ""
        track.parts[event.content_index] = {"state": "open", "deltas": [], "part": event.part}
        return
    part = track.parts[event.content_index]
    assert part["state"] == "text-done", "content_part.done before its text done"
    assert event.part.text == part["text"] and event.part.type == part["part"].type
    part["state"] = "done"


def _close_item(track: _ItemTrack, item: Any) -> None:
    assert item.type == track.item.type
    assert item.status in ("completed", "incomplete"), item.status
    assert all(p["state"] == "done" for p in track.parts.values()), "item done with a content part still open"
    if item.type == "function_call":
        assert item.call_id == track.item.call_id and item.name == track.item.name
        assert item.arguments == "".join(track.deltas)
        if item.status == "completed":
            assert track.args_done == item.arguments
        else:
            assert track.args_done is None, "an incomplete call has no function_call_arguments.done"
    else:
        texts = [p["text"] for _, p in sorted(track.parts.items())]
        assert [c.text for c in item.content] == texts
    track.done = item
