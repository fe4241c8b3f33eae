"""`/openapi.json` and FastAPI's `/docs` page: every route, its parameters and Maya's extensions.

The routes read their bodies themselves (so every error is OpenAI-shaped and names its
field), which leaves FastAPI nothing to describe them from; this module adds what it
cannot see: request bodies from the same pydantic models the routes validate with,
query parameters, and what Maya adds to or refuses from OpenAI's API. Both pages are
open like `/health` (they describe the API, never its data); the `/v1` routes and the
metrics they describe need the key as usual.

The request models are given by the composition root (`app.py`), not imported here: the
HTTP layer serves the APIs and must not depend on them, so the arrows stay one-way.
"""

from __future__ import annotations

from typing import Any, Mapping

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

OPENAPI_URL = "/openapi.json"
DOCS_URL = "/docs"

DESCRIPTION = """OpenAI-compatible Chat Completions and Responses APIs in front of an open-weight model.

With API keys configured, every `/v1` route and `/metrics/prometheus` need `Authorization: Bearer KEY` or
`x-api-key: KEY` (the operator can open the metrics to a scraper with `--metrics-public`); `/health`,
`/openapi.json` and `/docs` are always open.
Errors are `{"error": {"message", "type", "param", "code"}}` with `param` naming the offending field.
Streams are server-sent events; WebSocket upgrades are refused with a 400."""

Bodies = Mapping[tuple[str, str], type[BaseModel]]
"""(path, method) -> the pydantic model its route validates its body with."""

_NOTES = {
    ("/v1/responses", "post"): (
        "Create a response (JSON, or SSE with `stream: true`).",
        "Maya's behaviour beyond OpenAI's reference: responses are stored only with `store: true`; "
        "`client_metadata` takes any string values (16 KiB in all), never stored or echoed; "
        "`text.format` json_object/json_schema is held to its schema's grammar while the engine writes it "
        "(and a call `tool_choice` requires, to the family's call syntax), and validated before anything is "
        "published, with SSE keep-alive comments while the answer is held; `max_tool_calls` ends the "
        "turn at the limit. Hosted tools, item references, reasoning summaries, encrypted reasoning, "
        "conversations and `truncation: auto` are 400s naming the field.",
    ),
    ("/v1/responses/compact", "post"): (
        "Compaction: not supported.", "Always a 400 (`unsupported_endpoint`): Maya does not compact context.",
    ),
    ("/v1/chat/completions", "post"): (
        "Create a chat completion (JSON, or SSE with `stream: true`).",
        "Maya's additions: `reasoning_content` on messages and deltas; `response_format` json_object/"
        "json_schema held to its grammar while written, and it and `strict` tools validated before publishing; a prompt plus `max_tokens` over the "
        "context is a 400 `context_length_exceeded`, never a truncation. Extensions: `return_progress` "
        "(a stream gets `prompt_progress` chunks before its first token) and `strata_mcp` (the operator's "
        "MCP tools are offered and run on the server; their calls appear as `strata_mcp` chunks and field).",
    ),
    ("/v1/responses/{response_id}", "get"): (
        "Retrieve a stored response or a background task's snapshot.",
        "`stream=true` replays then follows a background task's events from `starting_after`.",
    ),
    ("/v1/responses/{response_id}", "delete"): ("Delete a stored response.", "A running task is a 409."),
    ("/v1/responses/{response_id}/cancel", "post"): ("Cancel a background task.", "Idempotent; waits up to 5 s."),
    ("/v1/responses/{response_id}/input_items", "get"): ("List a response's input items.", ""),
    ("/v1/mcp", "get"): ("The configured MCP servers: state, restarts, calls by outcome and tools.",
                         "Never shows a command, URL, header or environment."),
    ("/v1/status", "get"): ("Model, engine, context, queue, uptime and the store's figures.", ""),
    ("/metrics/prometheus", "get"): ("Prometheus metrics (`maya:*`).",
                                     "Needs the API key when keys are configured, unless the server runs with "
                                     "`--metrics-public` (`MAYA_METRICS_PUBLIC`); a missing or wrong key is a 401."),
    ("/health", "get"): ("Liveness; never needs a key.", ""),
}

_QUERY = {
    ("/v1/responses/{response_id}", "get"): [
        ("stream", {"type": "boolean", "default": False}, "Stream a background task's events (SSE)."),
        ("starting_after", {"type": "integer", "minimum": 0}, "With stream=true: resume after this sequence number."),
    ],
    ("/v1/responses/{response_id}/input_items", "get"): [
        ("order", {"type": "string", "enum": ["asc", "desc"], "default": "desc"}, "Item order."),
        ("limit", {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}, "Page size."),
        ("after", {"type": "string"}, "An item id: the page starts after it."),
    ],
}


def install_openapi(app: FastAPI, bodies: Bodies) -> None:
    """Make the app's `/openapi.json` (built on first request, then kept) the described one; `bodies`
    are the request models, each described under its route."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _describe(app, bodies)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _describe(app: FastAPI, bodies: Bodies) -> dict[str, Any]:
    schema = get_openapi(title=app.title, version=app.version, description=DESCRIPTION, routes=app.routes)
    refs, definitions = models_json_schema(
        [(model, "validation") for model in bodies.values()], ref_template="#/components/schemas/{model}"
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.update(definitions.get("$defs", {}))
    for (path, method), operation in _operations(schema):
        summary, notes = _NOTES.get((path, method), (None, ""))
        if summary:
            operation["summary"] = summary
        if notes:
            operation["description"] = notes
        model = bodies.get((path, method))
        if model is not None:
            body_schema = refs[(model, "validation")]
            operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body_schema}}}
        operation.setdefault("parameters", []).extend(
            {"name": name, "in": "query", "required": False, "schema": kind, "description": text}
            for name, kind, text in _QUERY.get((path, method), ())
        )
    return schema


def _operations(schema: dict[str, Any]):
    for path, methods in schema.get("paths", {}).items():
        for method, operation in methods.items():
            yield (path, method), operation
