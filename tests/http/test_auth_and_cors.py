"""Authentication and CORS, shared by every /v1 route."""

from __future__ import annotations

import openai
import pytest

KEYS = ("key-one", "key-two")


@pytest.fixture
def secured(start_server):
    return start_server(["ok"], api_keys=KEYS, cors_origins=("https://app.example",))


@pytest.mark.parametrize("key", KEYS)
def test_each_configured_key_works_with_the_sdk(secured, key):
    completion = secured.client(api_key=key).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert completion.choices[0].message.content == "ok"


def test_x_api_key_header_is_accepted(secured):
    with secured.http() as http:
        response = http.get("/v1/models", headers={"x-api-key": "key-two"})
    assert response.status_code == 200


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"x-api-key": "wrong"}, {"Authorization": "Basic a2V5LW9uZQ=="},
     {"Authorization": "Bearer"}],
)
def test_missing_or_wrong_keys_get_401_with_an_openai_error(secured, headers):
    with secured.http() as http:
        response = http.post("/v1/chat/completions", headers=headers, json={"messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "invalid_api_key"
    assert set(error) == {"message", "type", "param", "code"}
    assert "key-one" not in response.text
    assert secured.engine.calls == 0


def test_sdk_with_a_wrong_key_raises_authentication_error(secured):
    with pytest.raises(openai.AuthenticationError):
        secured.client(api_key="nope").models.list()


@pytest.mark.parametrize("path", ["/v1/models", "/v1/status"])
def test_every_v1_route_needs_the_key(secured, path):
    with secured.http() as http:
        assert http.get(path).status_code == 401
        assert http.get(path, headers={"Authorization": "Bearer key-one"}).status_code == 200


def test_health_needs_no_key(secured):
    with secured.http() as http:
        response = http.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_without_keys_everything_is_open(start_server):
    server = start_server(["ok"])
    with server.http() as http:
        assert http.get("/v1/models").status_code == 200


def test_preflight_is_answered_without_auth_for_allowed_origins(secured):
    with secured.http() as http:
        response = http.options("/v1/chat/completions", headers={
            "Origin": "https://app.example", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        })
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "https://app.example"
    assert "POST" in response.headers["access-control-allow-methods"]


def test_preflight_from_an_unknown_origin_is_refused_in_openai_shape(secured):
    with secured.http() as http:
        response = http.options("/v1/chat/completions", headers={
            "Origin": "https://evil.example", "Access-Control-Request-Method": "POST",
        })
    assert "access-control-allow-origin" not in response.headers
    assert response.status_code == 403
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}
    assert response.json()["error"]["code"] == "origin_not_allowed"


def test_a_refused_preflight_from_an_allowed_origin_is_in_openai_shape(secured):
    with secured.http() as http:
        response = http.options("/v1/chat/completions", headers={
            "Origin": "https://app.example", "Access-Control-Request-Method": "PUT",
        })
    assert response.status_code == 403
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "cors_refused" and "method" in error["message"]


def test_cors_headers_on_answers_and_on_auth_errors(secured):
    with secured.http() as http:
        ok = http.get("/v1/models", headers={"Origin": "https://app.example", "x-api-key": "key-one"})
        denied = http.get("/v1/models", headers={"Origin": "https://app.example"})
        foreign = http.get("/v1/models", headers={"Origin": "https://evil.example", "x-api-key": "key-one"})
    assert ok.headers["access-control-allow-origin"] == "https://app.example"
    assert denied.status_code == 401
    assert denied.headers["access-control-allow-origin"] == "https://app.example"
    assert foreign.status_code == 403  # a foreign origin is refused before any work, key or not
    assert "access-control-allow-origin" not in foreign.headers


def test_wildcard_origin(start_server):
    server = start_server(["ok"], cors_origins=("*",))
    with server.http() as http:
        response = http.get("/v1/models", headers={"Origin": "https://anywhere.example"})
    assert response.headers["access-control-allow-origin"] == "*"


def test_no_cors_headers_without_configured_origins(start_server):
    server = start_server(["ok"])
    with server.http() as http:
        response = http.get("/v1/models", headers={"Origin": server.url})  # same origin: allowed
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers
