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


PUBLIC = {"/health", "/openapi.json", "/docs", "/docs/assets/{name}"}
"""The routes open by design (`http/auth.py`); every other one needs the key."""


def served_routes(app) -> list[tuple[str, str]]:
    """Every (method, path) the app serves, included routers walked into (a new route is covered as it lands);
    HEAD and OPTIONS (CORS preflights, answered before auth) left out."""
    found: list[tuple[str, str]] = []

    def walk(routes) -> None:
        for route in routes:
            inner = getattr(route, "original_router", None) or getattr(route, "app", None)
            if getattr(route, "methods", None) is None and hasattr(inner, "routes"):
                walk(inner.routes)
                continue
            methods = sorted(set(route.methods or ()) - {"HEAD", "OPTIONS"})
            found.extend((method, route.path) for method in methods)

    walk(app.routes)
    return found


def test_the_route_list_is_complete(secured):
    """The walk finds what the OpenAPI document lists (it would miss routes left out of it), and more than that."""
    routes = set(served_routes(secured.app))
    documented = {(method.upper(), path) for path, item in secured.app.openapi()["paths"].items() for method in item}
    assert documented <= routes
    assert {("POST", "/v1/chat/completions"), ("POST", "/v1/responses"), ("GET", "/metrics/prometheus")} <= routes


def test_every_route_but_the_public_ones_needs_the_key(secured):
    with secured.http() as http:
        for method, path in served_routes(secured.app):
            if path in PUBLIC:
                continue
            url = path.replace("{", "").replace("}", "")  # a path parameter's name as its value
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                response = http.request(method, url, headers=headers, json={"model": "m", "input": "hi"})
                assert response.status_code == 401, (method, path, headers, response.text)
                error = response.json()["error"]
                assert set(error) == {"message", "type", "param", "code"} and error["code"] == "invalid_api_key"
    assert secured.engine.calls == 0


def test_the_key_opens_the_v1_reads(secured):
    with secured.http() as http:
        for path in ("/v1/models", "/v1/status"):
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
        for method, path in served_routes(server.app):
            url = path.replace("{", "").replace("}", "")
            response = http.request(method, url, json={"model": "m", "input": "hi"})
            assert response.status_code != 401, (method, path, response.text)


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
