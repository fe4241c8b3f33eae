"""Hold Maya's response objects and stream events to the Open Responses schema (`openapi.json`).

`openapi.json` is the multi-vendor Responses schema published by the Open Responses
project (Apache-2.0, see LICENSE and NOTICE.md), copied here so a clean clone needs
nothing outside the repository. It is OpenAPI 3.1, whose schemas are JSON Schema
Draft 2020-12, so `jsonschema` validates against its components directly.

Two event types are spelled differently by the schema and by OpenAI's API, which
Maya's clients (the OpenAI SDKs, Codex, openai-agents) follow: OpenAI's
`response.reasoning_text.delta/done` are the schema's `response.reasoning.delta/done`.
Such an event is validated against its counterpart's schema under the schema's name;
every other event type must be one the schema lists.

The `error` event is shaped differently: the schema nests `{type, code, message, param}`
under `error`, while OpenAI's API sends `code`, `message` and `param` at the top of the
event, and the official Python SDK raises on any stream event that carries an `error` key,
so a nested payload would hide `response.failed` from its users. Maya sends OpenAI's
shape; the check nests those fields (with the event's own type, since OpenAI's error
event names no error class) and validates them as the schema's payload.

One field disagrees outright: the schema types an echoed `text.format` of type
`json_schema` with `schema: null`, while OpenAI's API echoes the schema object and the
OpenAI SDK's type requires it. Maya follows OpenAI there; that one field is checked by
the SDK types and left out of the schema check.

Another is narrower than OpenAI's API: the schema's `ReasoningEffortEnum` lists `none`, `low`, `medium`,
`high` and `xhigh` (its own descriptions name `minimal` too), while the OpenAI SDK's `ReasoningEffort` type
(openai 3.63) also has `minimal` and `max`, and DeepSeek's toolkit takes `max` as its own tier. Maya echoes
the effort the client asked for, as OpenAI does; an echoed `minimal` or `max` is checked by the SDK types
and left out of the schema check (read as the schema's "not specified", null), the rest of the object is not.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import orjson
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SCHEMA_URI = "urn:open-responses:openapi"
SCHEMA_PATH = Path(__file__).with_name("openapi.json")
OPENAI_SPELLINGS = {
    "response.reasoning_text.delta": "response.reasoning.delta",
    "response.reasoning_text.done": "response.reasoning.done",
}
BEYOND_SCHEMA_EFFORTS = ("minimal", "max")
"""Efforts OpenAI's SDK types have and the schema's enum lacks: checked by the SDK types only."""


@cache
def _document() -> dict:
    return orjson.loads(SCHEMA_PATH.read_bytes())


@cache
def _validator(component: str) -> Draft202012Validator:
    registry = Registry().with_resource(SCHEMA_URI, Resource.from_contents(_document(), DRAFT202012))
    return Draft202012Validator({"$ref": f"{SCHEMA_URI}#/components/schemas/{component}"}, registry=registry)


@cache
def _event_components() -> dict[str, str]:
    """Stream event type → the component that describes it, from the `/responses` stream's `oneOf`."""
    stream = _document()["paths"]["/responses"]["post"]["responses"]["200"]["content"]["text/event-stream"]
    components = {}
    for choice in stream["schema"]["oneOf"]:
        name = choice["$ref"].rsplit("/", 1)[1]
        components[_document()["components"]["schemas"][name]["properties"]["type"]["enum"][0]] = name
    return components


def _check(component: str, data: dict) -> None:
    errors = sorted(_validator(component).iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path)
        raise AssertionError(f"not a valid Open Responses {component} at '{where}': {errors[0].message}")


def check_response_object(data: dict) -> None:
    """A response object (JSON answer, retrieval, or the `response` of a lifecycle event)."""
    _check("ResponseResource", _schema_spelling(data))


def _schema_spelling(response: dict) -> dict:
    reasoning = response.get("reasoning") or {}
    if reasoning.get("effort") in BEYOND_SCHEMA_EFFORTS:
        response = {**response, "reasoning": {**reasoning, "effort": None}}
    fmt = (response.get("text") or {}).get("format") or {}
    if fmt.get("type") != "json_schema" or fmt.get("schema") is None:
        return response
    return {**response, "text": {**response["text"], "format": {**fmt, "schema": None}}}


def check_stream_event(data: dict) -> None:
    kind = data.get("type")
    schema_kind = OPENAI_SPELLINGS.get(kind, kind)
    component = _event_components().get(schema_kind)
    assert component is not None, f"{kind!r} is not an Open Responses stream event type"
    if schema_kind != kind:
        data = {**data, "type": schema_kind}
    if kind == "error":
        assert "error" not in data, "an `error` key makes the OpenAI SDK raise instead of yielding the event"
        fields = {key: data.get(key) for key in ("code", "message", "param")}
        data = {"type": kind, "sequence_number": data.get("sequence_number"), "error": {"type": kind, **fields}}
    if isinstance(data.get("response"), dict):
        data = {**data, "response": _schema_spelling(data["response"])}
    _check(component, data)

