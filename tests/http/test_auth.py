"""`ApiKeyMiddleware` on its own, around a tiny Starlette app that echoes the owner scope it was given.

Pins: which paths need a key (/v1 and /metrics, or only /v1 with `metrics_public`), both ways to send
it, a 401 in OpenAI's shape with `WWW-Authenticate: Bearer` that tells a missing key from a wrong one,
and the owner scope: the key's SHA-256 (never the key), or "public" when no keys are configured.
"""

from __future__ import annotations

import hashlib

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from maya_server.http.auth import PUBLIC_OWNER, ApiKeyMiddleware, owner_of

KEYS = ("key-one", "ключ-два")


async def echo(request: Request) -> JSONResponse:
    return JSONResponse({"owner": request.scope.get("state", {}).get("owner")})


def client(keys=KEYS, **options) -> TestClient:
    inner = Starlette(routes=[Route(p, echo) for p in ("/v1/models", "/metrics/prometheus", "/health")])
    return TestClient(ApiKeyMiddleware(inner, keys, **options))


def test_owner_is_the_keys_sha256_not_the_key():
    assert owner_of("key-one") == hashlib.sha256(b"key-one").hexdigest()
    assert owner_of("a") != owner_of("b")


@pytest.mark.parametrize("headers, key", [
    ({"Authorization": "Bearer key-one"}, "key-one"),
    ({"authorization": "bearer   key-one  "}, "key-one"),  # scheme in any case, key trimmed
    ({"x-api-key": "key-one"}, "key-one"),
    ({"Authorization": "Basic a2V5LW9uZQ==", "x-api-key": "key-one"}, "key-one"),  # not Bearer: x-api-key is read
    ({"x-api-key": "ключ-два".encode()}, "ключ-два"),  # any configured key, UTF-8 on the wire
])
def test_a_configured_key_passes_and_sets_its_owner(headers, key):
    answer = client().get("/v1/models", headers=headers)
    assert answer.status_code == 200 and answer.json() == {"owner": owner_of(key)}
    assert key not in answer.text


@pytest.mark.parametrize("headers, words", [
    ({}, "You didn't provide an API key"),
    ({"Authorization": "Bearer "}, "You didn't provide an API key"),
    ({"Authorization": "Bearer key-on"}, "Incorrect API key provided."),
    ({"Authorization": "Bearer wrong", "x-api-key": "key-one"}, "Incorrect API key provided."),  # Bearer decides
    ({"x-api-key": "KEY-ONE"}, "Incorrect API key provided."),
])
def test_a_missing_or_wrong_key_is_a_401_in_openai_shape(headers, words):
    answer = client().get("/v1/models", headers=headers)
    assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer"
    error = answer.json()["error"]
    assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"
    assert words in error["message"] and error["param"] is None


def test_metrics_need_the_key_unless_opened_for_a_scraper():
    assert client().get("/metrics/prometheus").status_code == 401
    assert client().get("/metrics/prometheus", headers={"x-api-key": "key-one"}).status_code == 200
    opened = client(metrics_public=True)
    assert opened.get("/metrics/prometheus").json() == {"owner": None}
    assert opened.get("/v1/models").status_code == 401


def test_open_paths_pass_untouched():
    assert client().get("/health").json() == {"owner": None}


def test_without_keys_every_request_is_the_public_owner():
    assert client(keys=()).get("/v1/models").json() == {"owner": PUBLIC_OWNER}
    assert client(keys=()).get("/v1/models", headers={"x-api-key": "anything"}).json() == {"owner": PUBLIC_OWNER}
