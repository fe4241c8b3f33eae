"""`/metrics/prometheus` needs the API key once keys are configured (its figures describe the traffic),
unless the operator opens it for a scraper with `metrics_public`; without keys it is open, like
everything on a loopback-only server. The pages that describe the API stay open either way."""

from __future__ import annotations

import pytest

from maya_server.cli import load

KEY = "metrics-key"
METRICS = "/metrics/prometheus"


def get(server, path: str, headers: dict | None = None):
    with server.http() as http:
        return http.get(path, headers=headers or {})


@pytest.fixture
def secured(start_server):
    return start_server(api_keys=(KEY,))


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"x-api-key": "wrong"}],
                         ids=["no key", "wrong bearer", "wrong x-api-key"])
def test_without_the_right_key_the_metrics_are_a_401_like_v1(secured, headers):
    answer = get(secured, METRICS, headers)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == "Bearer"
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == "invalid_api_key"
    assert "maya:" not in answer.text


@pytest.mark.parametrize("headers", [{"Authorization": f"Bearer {KEY}"}, {"x-api-key": KEY}])
def test_with_the_key_the_metrics_are_served(secured, headers):
    answer = get(secured, METRICS, headers)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    assert any(line.startswith("maya:") for line in answer.text.splitlines())


def test_metrics_public_opens_only_the_metrics(start_server):
    server = start_server(api_keys=(KEY,), metrics_public=True)
    answer = get(server, METRICS)
    assert answer.status_code == 200 and "maya:http_requests_total" in answer.text
    assert get(server, "/v1/status").status_code == 401


def test_without_configured_keys_the_metrics_are_open(start_server):
    answer = get(start_server(), METRICS)
    assert answer.status_code == 200 and "maya:" in answer.text


@pytest.mark.parametrize("path", ["/health", "/openapi.json", "/docs"])
def test_the_pages_that_describe_the_api_stay_open(secured, path):
    assert get(secured, path).status_code == 200


def test_the_openapi_description_says_the_metrics_need_the_key(secured):
    document = get(secured, "/openapi.json").json()
    assert "--metrics-public" in document["paths"][METRICS]["get"]["description"]
    assert "/metrics/prometheus" in document["info"]["description"]


@pytest.mark.parametrize("argv, environ, expected", [
    ([], {}, False),
    (["--metrics-public"], {}, True),
    ([], {"MAYA_METRICS_PUBLIC": "true"}, True),
    ([], {"MAYA_METRICS_PUBLIC": "0"}, False),
], ids=["default", "flag", "env on", "env off"])
def test_the_setting_comes_from_a_flag_or_the_environment(argv, environ, expected):
    config = load(["--engine", "scripted", *argv], "maya", "glm", environ=environ)
    assert config.metrics_public is expected


def test_the_setting_comes_from_the_config_file(tmp_path):
    path = tmp_path / "maya.json"
    path.write_text('{"engine": "scripted", "metrics_public": true}')
    assert load(["--config", str(path)], "maya", "glm", environ={}).metrics_public is True
