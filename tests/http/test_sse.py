"""`EventStreamResponse` is a Starlette response like any other (headers that whoever holds it can read
and extend, `background`), and its own stream behaviours hold: keep-alive comments, the farewell on
shutdown, disconnects and stalled sockets, and `on_close` exactly once however the stream ends.

The stream tests call the response as an ASGI app with a scripted `receive`/`send`, so each ending is
forced rather than hoped for; the header tests go through FastAPI and its middleware stack.
"""

from __future__ import annotations

import asyncio

from fastapi import BackgroundTasks, FastAPI, Request
from starlette.datastructures import MutableHeaders
from starlette.testclient import TestClient

from maya_server.http.shutdown import Shutdown
from maya_server.http.sse import KEEPALIVE_COMMENT, EventStreamResponse, encode_event

SSE_TYPE = "text/event-stream; charset=utf-8"
FAREWELL = encode_event({"type": "error", "code": "server_shutdown"}, event="error")


class Events:
    """An event source that records whether it started and whether its `finally` ran."""

    def __init__(self, *chunks: bytes, then_wait: bool = False, delay: float = 0.0) -> None:
        self.chunks, self.then_wait, self.delay = chunks, then_wait, delay
        self.started = self.finished = False

    async def __call__(self):
        self.started = True
        try:
            for chunk in self.chunks:
                await asyncio.sleep(self.delay)
                yield chunk
            if self.then_wait:
                await asyncio.Event().wait()
        finally:
            self.finished = True


class Client:
    """A scripted ASGI peer: records every message sent; disconnects when told to."""

    def __init__(self, *, stall_body: bool = False) -> None:
        self.messages: list[dict] = []
        self.gone = asyncio.Event()
        self.first_body = asyncio.Event()
        self.stall_body = stall_body

    async def receive(self) -> dict:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict) -> None:
        if message["type"] == "http.response.body" and message.get("more_body"):
            if self.stall_body:
                await asyncio.Event().wait()
            self.first_body.set()
        self.messages.append(message)

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages if m["type"] == "http.response.body")

    @property
    def ended(self) -> bool:
        return any(m["type"] == "http.response.body" and not m.get("more_body") for m in self.messages)


def serve(response: EventStreamResponse, client: Client, scope: dict | None = None, during=None) -> None:
    async def main() -> None:
        call = asyncio.ensure_future(response({"type": "http", **(scope or {})}, client.receive, client.send))
        if during is not None:
            await during()
        await asyncio.wait_for(call, 5)

    asyncio.run(main())


def closer() -> list[str]:
    return []


def test_the_headers_sent_are_the_response_objects_own():
    events = Events(b"data: 1\n\n")
    response = EventStreamResponse(events(), headers={"x-trace": "abc"})
    assert response.headers["content-type"] == SSE_TYPE
    response.headers["x-added-later"] = "yes"
    client = Client()
    serve(response, client)
    start = client.messages[0]
    assert start["type"] == "http.response.start" and start["status"] == 200
    sent = dict((k.decode(), v.decode()) for k, v in start["headers"])
    assert sent == {"content-type": SSE_TYPE, "cache-control": "no-cache", "x-accel-buffering": "no",
                    "x-trace": "abc", "x-added-later": "yes"}  # no content-length: the body streams
    assert client.body == b"data: 1\n\n" and client.ended


def test_a_replaced_body_iterator_is_what_is_sent_and_closed():
    """Starlette's wrappers swap `body_iterator`; the stream must follow the swap."""
    original, replacement, closed = Events(b"data: old\n\n"), Events(b"data: new\n\n", then_wait=True), closer()
    response = EventStreamResponse(original(), on_close=lambda: closed.append("x"))
    response.body_iterator = replacement()
    client = Client()

    async def leave() -> None:
        await client.first_body.wait()
        client.gone.set()

    serve(response, client, during=leave)
    assert client.body == b"data: new\n\n" and replacement.finished and closed == ["x"]
    assert not original.started


def sse_app(ran: list[str]) -> FastAPI:
    """A route returning an SSE stream with a header and a background task of its own, and two outer
    middlewares: FastAPI's `http` middleware (reads and adds headers) and a raw ASGI one."""
    app = FastAPI()

    @app.get("/stream")
    async def stream(tasks: BackgroundTasks) -> EventStreamResponse:
        tasks.add_task(ran.append, "background")  # FastAPI makes these the response's `background`
        answer = EventStreamResponse(Events(b"data: a\n\n", b"data: b\n\n")(), on_close=lambda: ran.append("closed"))
        answer.headers["x-from-route"] = "1"
        return answer

    @app.middleware("http")
    async def reads_and_adds(request: Request, call_next):
        answer = await call_next(request)
        answer.headers["x-seen-type"] = answer.headers["content-type"]
        return answer

    def raw_asgi(inner):
        async def app_(scope, receive, send):
            async def add_header(message):
                if message["type"] == "http.response.start":
                    MutableHeaders(scope=message).append("x-raw", "2")
                await send(message)
            await inner(scope, receive, add_header)
        return app_

    app.add_middleware(lambda inner: raw_asgi(inner))
    return app


def test_middleware_and_the_route_see_and_add_headers_and_the_background_runs_after_the_stream():
    ran: list[str] = []
    with TestClient(sse_app(ran)) as http, http.stream("GET", "/stream") as answer:
        body = b"".join(answer.iter_bytes())
        headers = answer.headers
    assert answer.status_code == 200
    assert headers["content-type"] == SSE_TYPE and headers["cache-control"] == "no-cache"
    assert headers["x-seen-type"] == SSE_TYPE
    assert headers["x-from-route"] == "1" and headers["x-raw"] == "2"
    assert body == b"data: a\n\ndata: b\n\n"
    assert ran == ["closed", "background"]


def test_keepalive_comments_fill_the_silences():
    events = Events(b"data: late\n\n", delay=0.3)
    client = Client()
    serve(EventStreamResponse(events(), keepalive=0.05), client)
    assert client.body.startswith(KEEPALIVE_COMMENT * 2) and client.body.endswith(b"data: late\n\n")
    assert client.ended and events.finished


def test_a_disconnect_stops_the_events_and_on_close_runs_once():
    events, closed = Events(b"data: 1\n\n", then_wait=True), closer()
    client = Client()

    async def leave() -> None:
        await client.first_body.wait()
        client.gone.set()

    serve(EventStreamResponse(events(), on_close=lambda: closed.append("x")), client, during=leave)
    assert events.finished and closed == ["x"]
    assert client.body == b"data: 1\n\n" and not client.ended  # nobody is there to end it for


def test_on_close_runs_even_when_the_events_never_started():
    events, closed = Events(b"data: 1\n\n"), closer()
    client = Client()
    client.gone.set()

    async def refuse_start(message):  # the client is gone before the headers could be written
        await asyncio.Event().wait()

    client.send = refuse_start
    serve(EventStreamResponse(events(), on_close=lambda: closed.append("x")), client)
    assert not events.started and closed == ["x"]


def test_shutdown_closes_the_events_and_ends_with_the_farewell():
    events, closed = Events(b"data: 1\n\n", then_wait=True), closer()
    shutdown = Shutdown()
    client = Client()

    async def shut_down() -> None:
        await client.first_body.wait()
        shutdown.begin()

    response = EventStreamResponse(events(), on_close=lambda: closed.append("x"), farewell=lambda: FAREWELL)
    serve(response, client, scope={"state": {"shutdown": shutdown}}, during=shut_down)
    assert client.body == b"data: 1\n\n" + FAREWELL and client.ended
    assert events.finished and closed == ["x"]


def test_without_a_farewell_the_stream_ignores_shutdown():
    shutdown = Shutdown()
    shutdown.begin()
    client = Client()
    serve(EventStreamResponse(Events(b"data: 1\n\n", b"data: 2\n\n")()), client,
          scope={"state": {"shutdown": shutdown}})
    assert client.body == b"data: 1\n\ndata: 2\n\n" and client.ended


def test_a_socket_that_takes_no_data_is_dropped_after_the_write_timeout():
    events, closed = Events(b"data: 1\n\n", then_wait=True), closer()
    client = Client(stall_body=True)
    serve(EventStreamResponse(events(), on_close=lambda: closed.append("x"), write_timeout=0.05), client)
    assert events.finished and closed == ["x"] and not client.ended
