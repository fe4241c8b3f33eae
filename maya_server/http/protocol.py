"""The HTTP protocol Maya serves with: uvicorn's, plus read deadlines for request headers and bodies.

uvicorn 0.54 times out nothing while a request arrives: a connection that sends
nothing, or its headers or body one byte every few seconds, is held open for ever
(its only timer, keep-alive, is cancelled by every byte received, and is not armed
on a new connection at all). Hundreds of such connections cost a file descriptor and
a buffer each, and the slow-headers kind needs no API key. An ASGI middleware cannot
help: the app is not called before the headers are complete, and a body deadline
there would only see what the app reads, not what the client sends.

So the deadlines live in the protocol, as a small subclass of uvicorn's httptools
protocol (what `uvicorn[standard]` runs), hooked on the parser's callbacks:

- headers: from the connection's start, or from the end of the previous response on
  a kept-alive connection, until the headers are complete (`header_timeout`);
- body: from the end of the headers until the whole body has arrived (`body_timeout`).

A pipelined request (sent before the answer to the one ahead of it is complete) waits its
turn: uvicorn queues it and pauses reading. Its deadlines run from the moment its turn comes
(the end of the previous response): the body's, if its headers were already complete, else the
headers'. A request that has begun is not idle, so uvicorn's keep-alive timer, which the end of
a response arms, is cancelled for it: without that, a pipelined request whose headers stall
would be closed silently by keep-alive instead of getting its 408.

A deadline that passes before any answer started writes a 408 in OpenAI's error shape
(code `request_timeout`) and closes the connection; the app, if it was reading the body,
sees the client gone. One that passes after an answer started just closes it. A deadline
is a whole-phase bound, so a sender that trickles bytes cannot extend it. Bytes that are not
HTTP at all get uvicorn's 400, here in OpenAI's error shape too (code `invalid_http_request`).

    config = uvicorn.Config(app, **serving_protocols(server_config))
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ..config import ServerConfig
from .websocket import QuietRefusalWebSockets

TIMEOUT_CODE = "request_timeout"


def serving_protocols(config: ServerConfig) -> dict[str, Any]:
    """`protocol_options` with the configured deadlines."""
    return protocol_options(header_timeout=config.request_header_timeout, body_timeout=config.request_body_timeout)


def protocol_options(*, header_timeout: float, body_timeout: float) -> dict[str, Any]:
    """The `uvicorn.Config` arguments that serve with Maya's protocols: `http` with these deadlines, and `ws`
    with the WebSocket refusal logged as the normal event it is."""
    http = type("MayaHttpProtocol", (DeadlineHttpProtocol,),
                {"header_timeout": header_timeout, "body_timeout": body_timeout})
    return {"http": http, "ws": QuietRefusalWebSockets}


class DeadlineHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with `header_timeout` and `body_timeout` (seconds; set by `protocol_options`,
    one subclass per server, so two servers in one process keep their own)."""

    header_timeout: float = 10.0
    body_timeout: float = 60.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._deadline: asyncio.TimerHandle | None = None
        self._reading = "idle"  # the parser's place in the latest request: idle, headers or body
        super().connection_made(transport)
        self._arm(self.header_timeout, "headers")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        self._reading = "headers"  # the deadline that runs (if its turn has come) is still the headers'
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._disarm()
        self._reading = "body"
        pipelined = self.cycle is not None and not self.cycle.response_complete
        super().on_headers_complete()
        if not pipelined:  # a pipelined request's deadline runs from its turn (`on_response_complete`)
            self._arm(self.body_timeout, "body", self.cycle)

    def handle_websocket_upgrade(self) -> None:
        self._disarm()  # the connection is the WebSocket protocol's from here
        super().handle_websocket_upgrade()

    def on_message_complete(self) -> None:
        self._disarm()
        self._reading = "idle"
        super().on_message_complete()
        if self.cycle is not None and self.cycle.response_complete:  # answered before its body was all read:
            self._arm(self.header_timeout, "headers")  # the next request's turn has already come

    def on_response_complete(self) -> None:
        queued = self.pipeline[-1][0] if self.pipeline else None  # the request uvicorn starts next, if any
        answered = self.cycle
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if queued is not None:  # its turn has come; its body may still be on its way
            if queued is self.cycle and self._reading == "body":
                self._arm(self.body_timeout, "body", queued)
            else:
                self._disarm()  # its body is complete: nothing is awaited from the client until it is answered
        elif answered is self.cycle and self._reading == "body":
            pass  # answered early while its body still arrives: the body's deadline keeps running
        else:  # idle, or the next request has begun: its headers' deadline runs from now
            if self._reading == "headers":
                self._unset_keepalive_if_required()  # not idle: a request has begun
            self._arm(self.header_timeout, "headers")

    def _arm(self, seconds: float, phase: str, cycle: Any = None) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self._deadline = self.loop.call_later(seconds, self._expired, phase, seconds, cycle)

    def _disarm(self) -> None:
        if getattr(self, "_deadline", None) is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self, phase: str, seconds: float, cycle: Any) -> None:
        """`cycle`: the request whose body was awaited (None for headers: no answer is under way then)."""
        self._deadline = None
        if self.transport.is_closing():
            return
        if cycle is None or not cycle.response_started:
            setting = "--request-header-timeout" if phase == "headers" else "--request-body-timeout"
            self.transport.write(self._error_answer(
                b"408 Request Timeout", f"The request {phase} did not arrive within {seconds:g} s ({setting}).",
                TIMEOUT_CODE))
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app, if it reads the body, sees the client gone
            cycle.message_event.set()
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to bytes that are not HTTP, in OpenAI's error shape instead of plain text."""
        self.transport.write(self._error_answer(
            b"400 Bad Request", f"{msg} Send an HTTP/1.1 request.", "invalid_http_request"))
        self.transport.close()

    def _error_answer(self, status: bytes, message: str, code: str) -> bytes:
        body = orjson.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                       "code": code}})
        head = [b"HTTP/1.1 " + status + b"\r\n"]
        head += [name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers]
        head += [b"content-type: application/json\r\n", b"content-length: %d\r\n" % len(body),
                 b"connection: close\r\n\r\n"]
        return b"".join(head) + body
