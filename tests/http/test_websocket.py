"""What the Open Responses schema describes and Maya does not serve: compaction and WebSocket transport.

Both answer 400 in OpenAI's error shape naming what is unsupported (not a 405 from the
`/v1/responses/{id}` route, not a bare 403 from an unrouted upgrade), and neither reaches
the engine.
"""

from __future__ import annotations

import asyncio

import orjson
import pytest
import websockets

ERROR_KEYS = {"message", "type", "param", "code"}


def assert_openai_error(body: dict, code: str, *words: str) -> None:
    assert set(body) == {"error"} and set(body["error"]) == ERROR_KEYS, body
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["code"] == code
    for word in words:
        assert word in body["error"]["message"]


def test_compact_is_a_400_naming_compaction(start_server):
    server = start_server()
    with server.http() as http:
        answer = http.post("/v1/responses/compact", json={"model": "m", "input": "hi"})
    assert answer.status_code == 400
    assert_openai_error(answer.json(), "unsupported_endpoint", "Compaction is not supported")
    assert server.engine.calls == 0


def test_compact_needs_the_key_like_every_v1_route(start_server):
    server = start_server(api_keys=("k1",))
    with server.http() as http:
        assert http.post("/v1/responses/compact", json={}).status_code == 401
        assert http.post("/v1/responses/compact", json={}, headers={"Authorization": "Bearer k1"}).status_code == 400


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/chat/completions", "/elsewhere"])
def test_websocket_upgrade_is_a_400_in_openai_shape(start_server, path):
    server = start_server()
    url = server.url.replace("http://", "ws://") + path

    async def connect():
        async with websockets.connect(url, open_timeout=10):
            pass

    with pytest.raises(websockets.InvalidStatus) as refused:
        asyncio.run(connect())
    answer = refused.value.response
    assert answer.status_code == 400
    assert_openai_error(orjson.loads(answer.body), "unsupported_transport", "WebSocket transport is not supported")
    assert server.engine.calls == 0
