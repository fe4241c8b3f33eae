"""Read deadlines for request headers and bodies, and WebSocket refusals logged as the normal event they are.

A client that sends nothing, or its headers or body a byte at a time, gets a 408 in OpenAI's
error shape when its phase's deadline passes and is disconnected; hundreds of them at once
are all closed, and the server's open connections and file descriptors come back to where
they were, round after round. (Deadlines here are a second or two; the defaults are 10 s and 60 s.)
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket

import pytest
import websockets

from maya_server.http.protocol import TIMEOUT_CODE

from tests.recorder import ERROR_KEYS
from tests.server import prometheus_values, wait_for

FAST = dict(request_header_timeout=1.0, request_body_timeout=1.5)
HEAD = b"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n"


def address(server) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").split(":")
    return host, int(port)


async def trickle(server, first: bytes, then: bytes = b"x", every: float = 0.3, bound: float = 30.0) -> bytes:
    """Send `first`, then `then` one byte every `every` seconds until the server closes; what it sent back."""
    reader, writer = await asyncio.open_connection(*address(server))
    writer.write(first)
    return await trickle_on(reader, writer, then, every, bound)


async def trickle_on(reader, writer, then: bytes, every: float, bound: float) -> bytes:
    """`then` one byte every `every` seconds on an open connection until the server closes it; what came back."""
    reply = b""
    try:
        async with asyncio.timeout(bound):
            while True:
                try:
                    chunk = await asyncio.wait_for(reader.read(65536), every)
                except asyncio.TimeoutError:
                    writer.write(then[:1])  # nothing at all for an idle client (`then` empty)
                    continue
                if not chunk:
                    return reply
                reply += chunk
    except (ConnectionError, OSError):
        return reply
    finally:
        writer.close()


def assert_timed_out(reply: bytes, phase: str) -> None:
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), reply[:200]
    assert b"connection: close" in head.lower()
    error = json.loads(body)["error"]
    assert set(error) == ERROR_KEYS and error["code"] == TIMEOUT_CODE and phase in error["message"]


@pytest.mark.parametrize(("first", "then", "phase"), [
    (b"", b"", "headers"), (b"POST /v1/responses HTTP/1.1\r\nX-Slow: ", b"x", "headers"),
    (HEAD + b'{"input', b" ", "body"),
], ids=["idle", "slow headers", "slow body"])
def test_a_slow_sender_gets_a_408_and_is_closed(start_server, first, then, phase):
    server = start_server(**FAST)
    assert_timed_out(asyncio.run(trickle(server, first, then)), phase)
    assert server.engine.calls == 0
    assert wait_for(lambda: server.open_connections == 0)
    metrics = prometheus_values(server.http().get("/metrics/prometheus").text, "maya:http_requests_total")
    assert not any('status="5' in name for name in metrics)


def test_the_header_deadline_rearms_on_a_kept_alive_connection(start_server):
    server = start_server(**FAST)

    async def two_requests() -> bytes:
        reader, writer = await asyncio.open_connection(*address(server))
        writer.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = await reader.readuntil(b"}")
        writer.write(b"GET /health HTTP/1.1\r\nHo")  # the second request's headers never finish
        rest = await asyncio.wait_for(reader.read(65536), 30)
        writer.close()
        return first + b"|" + rest

    first, rest = asyncio.run(two_requests()).split(b"|", 1)
    assert first.startswith(b"HTTP/1.1 200")
    assert_timed_out(rest, "headers")


def test_prompt_senders_are_unaffected(start_server):
    server = start_server(["ok"], **FAST)
    assert server.client().responses.create(model="m", input="hi").output_text == "ok"


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_hundreds_of_slow_senders_are_all_closed_without_growth(start_server):
    server = start_server(**FAST)
    kinds = [(b"", b""), (b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", b"x"), (HEAD + b'{"in', b" ")]

    async def round_of(count: int) -> list[bytes]:
        return await asyncio.gather(*(trickle(server, *kinds[i % 3], every=0.5) for i in range(count)))

    baseline = open_descriptors()
    for _ in range(2):
        replies = asyncio.run(round_of(300))
        assert all(reply.startswith(b"HTTP/1.1 408") for reply in replies)
        assert wait_for(lambda: server.open_connections == 0)
        assert wait_for(lambda: open_descriptors() <= baseline)
    assert server.engine.calls == 0


def test_a_refused_websocket_upgrade_logs_no_error(start_server):
    server = start_server()
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(handler)
    try:
        async def connect():
            async with websockets.connect(server.url.replace("http://", "ws://") + "/v1/responses", open_timeout=10):
                pass

        with pytest.raises(websockets.InvalidStatus):
            asyncio.run(connect())
        socket.create_connection(address(server)).close()  # a later event: the refusal's logging is done
        assert wait_for(lambda: server.open_connections == 0)
    finally:
        logger.removeHandler(handler)
    assert not [r for r in records if r.levelno >= logging.ERROR], [r.getMessage() for r in records]


def test_bytes_that_are_not_http_get_a_400_in_openai_shape(start_server):
    server = start_server()

    async def garbage() -> bytes:
        reader, writer = await asyncio.open_connection(*address(server))
        writer.write(b"\x16\x03\x01 not http at all\r\n\r\n")  # e.g. a TLS hello to the plain port
        reply = await asyncio.wait_for(reader.read(65536), 30)
        writer.close()
        return reply

    reply = asyncio.run(garbage())
    assert reply.startswith(b"HTTP/1.1 400")
    error = json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]
    assert set(error) == ERROR_KEYS and error["code"] == "invalid_http_request"


HEALTH = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def answers(reply: bytes) -> tuple[bytes, bytes]:
    """The first answer (to the pipelined GET /health) and all that came after it."""
    head, _, rest = reply.partition(b"\r\n\r\n")
    lines = head.lower().split(b"\r\n")
    length = int(next(line.split(b":")[1] for line in lines if line.startswith(b"content-length")))
    return head + b"\r\n\r\n" + rest[:length], rest[length:]


@pytest.mark.parametrize(("second", "then", "phase"), [
    (b"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", b"x", "headers"),
    (HEAD + b'{"input', b" ", "body"),
], ids=["slow headers", "slow body"])
def test_a_pipelined_slow_request_gets_its_408_too(start_server, second, then, phase):
    """The slow request rides in one write behind a quick one: its deadline runs from its turn, and it gets the
    same 408 as a request that came alone (a bound of 30 s, against deadlines of 1-1.5 s)."""
    server = start_server(**FAST)
    first, rest = answers(asyncio.run(trickle(server, HEALTH + second, then, every=0.3, bound=30)))
    assert first.startswith(b"HTTP/1.1 200")
    assert_timed_out(rest, phase)
    assert server.engine.calls == 0
    assert wait_for(lambda: server.open_connections == 0)


def test_a_pipelined_request_whose_headers_stall_past_keep_alive_gets_its_408(start_server):
    """uvicorn's keep-alive (5 s) is for an idle connection; one whose next request has begun is not idle."""
    server = start_server(request_header_timeout=6.0, request_body_timeout=6.0)
    reply = asyncio.run(trickle(server, HEALTH + b"POST /v1/responses HTTP/1.1\r\nX-Slow: ", b"", every=0.3, bound=30))
    first, rest = answers(reply)
    assert first.startswith(b"HTTP/1.1 200")
    assert_timed_out(rest, "headers")


def test_after_an_answer_given_before_the_body_arrived_the_next_request_still_has_a_deadline(start_server):
    """A 401 goes out before the body is read; once the body is in, the next request's headers are timed."""
    server = start_server(api_keys=["sk-test"], **FAST)

    async def early_answer_then_slow_headers() -> tuple[bytes, bytes]:
        reader, writer = await asyncio.open_connection(*address(server))
        writer.write(HEAD + b"{" * 39)
        first = await asyncio.wait_for(reader.readuntil(b"}}"), 30)
        writer.write(b"{" + b"GET /health HTTP/1.1\r\nX-Slow: ")  # the body's last byte, then slow headers
        rest = await trickle_on(reader, writer, b"x", every=0.3, bound=30)
        return first, rest

    first, rest = asyncio.run(early_answer_then_slow_headers())
    assert first.startswith(b"HTTP/1.1 401")
    assert_timed_out(rest, "headers")
