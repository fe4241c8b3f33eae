"""WebSocket upgrades: refused with a 400 in OpenAI's error shape, on every path.

Maya streams over SSE only (the spec lists WebSocket transport as unsupported).
Without this, Starlette closes an unrouted upgrade with a bare 403 and no body, which
a client reads as an authentication problem. The denial is sent as an HTTP response
through the ASGI `websocket.http.response` extension (uvicorn has it); a server
without it can only close the socket, with the WebSocket close code for a policy
refusal.

uvicorn's WebSocket protocol logs "ASGI callable returned without completing handshake"
at ERROR after an app that answered the upgrade with an HTTP response, although that
response is the handshake's end; `QuietRefusalWebSockets` (the `ws` protocol Maya serves
with, see protocol.py) records it as such, so a refused upgrade is the INFO access line
uvicorn writes for it and nothing more.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from ..errors import InvalidRequestError
from .errors import error_response

WEBSOCKET_UNSUPPORTED = InvalidRequestError(
    "WebSocket transport is not supported: send a normal HTTP POST; for streaming, set \"stream\": true "
    "and read server-sent events.",
    code="unsupported_transport",
)


class WebSocketRefusal:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        websocket = WebSocket(scope, receive, send)
        if "websocket.http.response" in scope.get("extensions", {}):
            await websocket.send_denial_response(error_response(WEBSOCKET_UNSUPPORTED))
        else:
            await websocket.close(code=1008, reason="WebSocket transport is not supported")


class QuietRefusalWebSockets(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, for which a complete denial response ends the handshake."""

    async def send(self, message: Message) -> None:
        await super().send(message)
        if message["type"] == "websocket.http.response.body" and not message.get("more_body", False):
            self.handshake_complete = True  # the denial was sent: nothing is missing
