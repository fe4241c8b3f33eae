"""Every HTTP response is counted, and timed, by its route template, never by the raw path: a path with an id
is counted under its template, an unrouted path under `unmatched`, an app that raises before answering as a
500, and a non-HTTP scope passes straight through uncounted."""

from __future__ import annotations

import asyncio

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from maya_server.http.request_metrics import RequestMetricsMiddleware
from maya_server.metrics import Metrics


async def _item(request):
    return PlainTextResponse("ok", status_code=201)


async def _boom(request):
    raise RuntimeError("boom")


def _client(metrics):
    app = Starlette(routes=[Route("/v1/items/{item_id}", _item), Route("/boom", _boom)])
    app.add_middleware(RequestMetricsMiddleware, metrics=metrics)
    return TestClient(app, raise_server_exceptions=False)


def _value(metrics, name, **labels):
    return metrics.registry.get_sample_value(name, labels)


def test_a_response_is_counted_by_route_template_and_status_not_raw_path():
    metrics = Metrics()
    client = _client(metrics)
    client.get("/v1/items/abc")
    client.get("/v1/items/secret-id-2")
    assert _value(metrics, "maya:http_requests_total", route="/v1/items/{item_id}", status="201") == 2
    assert _value(metrics, "maya:http_request_duration_seconds_count", route="/v1/items/{item_id}") == 2
    text = "\n".join(str(s) for f in metrics.registry.collect() for s in f.samples)
    assert "secret-id-2" not in text


def test_an_unrouted_path_is_counted_as_unmatched():
    metrics = Metrics()
    _client(metrics).get("/nowhere/123")
    assert _value(metrics, "maya:http_requests_total", route="unmatched", status="404") == 1


def test_an_app_that_raises_is_counted_as_a_500():
    metrics = Metrics()
    assert _client(metrics).get("/boom").status_code == 500
    assert _value(metrics, "maya:http_requests_total", route="/boom", status="500") == 1


def test_a_non_http_scope_passes_through_uncounted():
    metrics = Metrics()
    seen = []

    async def inner(scope, receive, send):
        seen.append(scope["type"])

    asyncio.run(RequestMetricsMiddleware(inner, metrics)({"type": "lifespan"}, None, None))
    assert seen == ["lifespan"]
    assert not [s for f in metrics.registry.collect() for s in f.samples
                if s.name == "maya:http_requests_total"]


@pytest.mark.parametrize("status", [200, 404])
def test_the_status_recorded_is_the_one_sent(status):
    metrics = Metrics()

    async def inner(scope, receive, send):
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def send(message):
        pass

    asyncio.run(RequestMetricsMiddleware(inner, metrics)({"type": "http", "path": "/x"}, None, send))
    assert _value(metrics, "maya:http_requests_total", route="unmatched", status=str(status)) == 1
