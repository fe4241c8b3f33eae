"""At shutdown every request that has not started its answer gets an immediate 503 `server_shutdown`.

Non-streamed requests waiting for the engine, one still sending its body, and ones still
fetching an image (streamed or not) are answered in OpenAI's error shape as soon as the
drain begins, instead of waiting out the grace period and being cut (formerly an empty 499
or a plain-text 500); a stream already open still ends with its terminal event.
"""

from __future__ import annotations

import json
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx

from maya_server.http.shutdown import SHUTDOWN_CODE

from tests.recorder import ERROR_KEYS
from tests.scripted import RecordingScriptedEngine
from tests.server import RunningServer, scripted_config, wait_for

ASK = {"messages": [{"role": "user", "content": "hi"}]}


def assert_shutdown_503(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert set(error) == ERROR_KEYS and error["code"] == SHUTDOWN_CODE and error["type"] == "server_error"


def open_stream(url: str, opened: threading.Event) -> list[str]:
    with httpx.Client(base_url=url, timeout=60) as http, \
            http.stream("POST", "/v1/chat/completions", json={**ASK, "stream": True}) as answer:
        lines = []
        for line in answer.iter_lines():
            if line.startswith("data: "):
                lines.append(line[6:])
                opened.set()
        return lines


def slow_upload(url: str, started: threading.Event) -> bytes:
    """Headers and half a body, then nothing more: the answer that comes back."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{\"input\": ")
        started.set()
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
        return reply


def test_requests_not_yet_answered_get_a_503_while_an_open_stream_ends_with_its_event(start_server):
    server = start_server(["tick " * 3000], delay=0.01, slots=1, max_queue=8)
    opened, uploading = threading.Event(), threading.Event()
    with ThreadPoolExecutor(6) as pool, httpx.Client(base_url=server.url, timeout=60) as http:
        stream = pool.submit(open_stream, server.url, opened)
        assert opened.wait(20)
        waiting = [pool.submit(http.post, "/v1/chat/completions", json=ASK),
                   pool.submit(http.post, "/v1/responses", json={"input": "hi"})]
        upload = pool.submit(slow_upload, server.url, uploading)
        assert uploading.wait(20)
        assert wait_for(lambda: server.app.state.service.queue.waiting == 2, 20)
        server.stop()
        for future in waiting:
            assert_shutdown_503(future.result(timeout=30))
        reply = upload.result(timeout=30)
        assert reply.startswith(b"HTTP/1.1 503") and SHUTDOWN_CODE.encode() in reply
        last = json.loads(stream.result(timeout=30)[-1])
        assert last["error"]["code"] == SHUTDOWN_CODE


class SeeingEngine(RecordingScriptedEngine):
    """The scripted engine, taking images (so a request fetches them before it is prepared)."""

    accepts_images = True


def silent_image_server() -> tuple[socket.socket, str]:
    """An image URL on 127.0.0.1 whose server accepts the connection and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    return listener, f"http://127.0.0.1:{listener.getsockname()[1]}/cat.png"


def test_requests_fetching_an_image_get_a_503_streamed_or_not():
    listener, url = silent_image_server()
    config = scripted_config(image_allow_private=True, image_fetch_timeout=60.0)
    server = RunningServer(config, SeeingEngine(["never"], context_size=config.ctx))
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}
    try:
        with ThreadPoolExecutor(2) as pool, httpx.Client(base_url=server.url, timeout=60) as http:
            plain = pool.submit(http.post, "/v1/chat/completions", json={"messages": [image]})
            streamed = pool.submit(http.post, "/v1/chat/completions", json={"messages": [image], "stream": True})
            accepted = []
            while len(accepted) < 2:
                accepted.append(listener.accept()[0])  # both requests are now fetching
            server.stop()
            for future in (plain, streamed):
                assert_shutdown_503(future.result(timeout=30))
        assert server.engine.calls == 0
    finally:
        listener.close()
        server.stop()
