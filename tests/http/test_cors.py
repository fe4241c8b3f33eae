"""`JsonErrorCORSMiddleware` on its own: Starlette's CORS decisions, with a refused preflight re-rendered
as OpenAI's `{"error": {...}}` (403, code `cors_refused`, Starlette's reason in the message) that keeps
Starlette's CORS headers and carries a JSON content type and length of its own. Allowed preflights and
ordinary requests are Starlette's, untouched."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from maya_server.http.cors import JsonErrorCORSMiddleware

ORIGIN = "https://app.example"


async def hello(_request) -> PlainTextResponse:
    return PlainTextResponse("hello")


@pytest.fixture
def http() -> TestClient:
    app = Starlette(routes=[Route("/v1/models", hello, methods=["GET", "POST"])])
    return TestClient(JsonErrorCORSMiddleware(
        app, allow_origins=[ORIGIN], allow_methods=["GET", "POST"], allow_headers=["authorization"], max_age=600,
    ))


def preflight(http: TestClient, origin=ORIGIN, method="POST", headers=None):
    request_headers = {"Origin": origin, "Access-Control-Request-Method": method}
    if headers:
        request_headers["Access-Control-Request-Headers"] = headers
    return http.options("/v1/models", headers=request_headers)


def test_an_allowed_preflight_is_starlettes_answer(http):
    answer = preflight(http, headers="authorization")
    assert answer.status_code == 200 and answer.text == "OK"
    assert answer.headers["access-control-allow-origin"] == ORIGIN
    assert answer.headers["access-control-max-age"] == "600"


@pytest.mark.parametrize("options, reason", [
    ({"method": "PUT"}, "method"),
    ({"headers": "x-secret"}, "headers"),
    ({"origin": "https://evil.example"}, "origin"),
    ({"method": "DELETE", "headers": "x-secret"}, "method, headers"),
])
def test_a_refused_preflight_is_a_403_in_openai_shape(http, options, reason):
    answer = preflight(http, **options)
    assert answer.status_code == 403
    assert answer.headers["content-type"] == "application/json"
    assert int(answer.headers["content-length"]) == len(answer.content)
    assert answer.json() == {"error": {
        "message": f"This cross-origin request is not allowed: Disallowed CORS {reason}.",
        "type": "invalid_request_error", "param": None, "code": "cors_refused",
    }}


def test_a_refusal_keeps_starlettes_cors_headers(http):
    answer = preflight(http, method="PUT")
    assert answer.headers["access-control-allow-origin"] == ORIGIN
    assert "GET" in answer.headers["access-control-allow-methods"]


def test_simple_requests_pass_through_with_cors_headers(http):
    answer = http.get("/v1/models", headers={"Origin": ORIGIN})
    assert answer.status_code == 200 and answer.text == "hello"
    assert answer.headers["access-control-allow-origin"] == ORIGIN
    foreign = http.get("/v1/models", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in foreign.headers
