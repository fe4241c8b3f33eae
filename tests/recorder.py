"""Record every answer a test's client gets from Maya, and hold it to the OpenAI SDK types and the Open Responses schema.

Clients parse the wire themselves (the OpenAI SDK builds its models without validating;
Codex parses in Rust, the AI SDK in TypeScript), so `Recorder` sits outside Maya's app as
an ASGI layer, keeps a copy of each answer's body, and `check()` validates them after the
test (the `start_server` and `maya` fixtures do this for every server they start): every
`/v1/responses` JSON object and SSE event with `validate_response_types` / `validate_event`
(SDK types + Open Responses schema), every Chat Completions object and chunk with the
SDK's own models, every error in OpenAI's shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.responses.api.sse import iter_frames, validate_event, validate_response_types

ERROR_KEYS = {"message", "type", "param", "code"}


@dataclass
class Exchange:
    method: str
    path: str
    status: int = 0
    content_type: str = ""
    body: bytearray = field(default_factory=bytearray)
    request: bytearray = field(default_factory=bytearray)

    def request_json(self) -> dict:
        return orjson.loads(self.request) if self.request else {}


class Recorder:
    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []

    def __call__(self, app: ASGIApp) -> ASGIApp:
        async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http" or not scope["path"].startswith("/v1/") or scope["method"] == "OPTIONS":
                await app(scope, receive, send)
                return
            exchange = Exchange(scope["method"], scope["path"])
            self.exchanges.append(exchange)

            async def receive_and_keep() -> Message:
                message = await receive()
                if message["type"] == "http.request":
                    exchange.request += message.get("body", b"")
                return message

            async def send_and_keep(message: Message) -> None:
                if message["type"] == "http.response.start":
                    exchange.status = message["status"]
                    exchange.content_type = dict(message.get("headers", [])).get(b"content-type", b"").decode()
                elif message["type"] == "http.response.body":
                    exchange.body += message.get("body", b"")
                await send(message)

            await app(scope, receive_and_keep, send_and_keep)

        return recorded

    def of(self, path: str) -> list[Exchange]:
        return [e for e in self.exchanges if e.path == path]

    def check(self) -> int:
        """Validate every recorded answer; returns how many objects and events were checked."""
        return sum(_check(exchange) for exchange in self.exchanges)


def _check(exchange: Exchange) -> int:
    where = f"{exchange.method} {exchange.path} → {exchange.status}"
    if not exchange.body:
        return 0  # a 499 (the client left) or a stream cut before its first event
    if exchange.status >= 400:
        body = orjson.loads(exchange.body)
        assert set(body) == {"error"} and set(body["error"]) == ERROR_KEYS, f"{where}: {body}"
        return 1
    if exchange.content_type.startswith("text/event-stream"):
        complete = exchange.body[: exchange.body.rfind(b"\n\n") + 2]  # a reader that left mid-frame
        frames = [data for _, data in iter_frames(complete.decode().split("\n"))]
        if exchange.path == "/v1/chat/completions":
            return sum(_chat_chunk(data, where) for data in frames)
        for data in frames:
            validate_event(orjson.loads(data))
        return len(frames)
    body = orjson.loads(exchange.body)
    if exchange.path == "/v1/chat/completions":
        ChatCompletion.model_validate(body)  # Maya's `reasoning_content` is an extra these types allow
    elif exchange.path.startswith("/v1/responses") and body.get("object") == "response":
        validate_response_types(body)
    return 1


def _chat_chunk(data: str, where: str) -> int:
    if data == "[DONE]":
        return 0
    chunk = orjson.loads(data)
    if "error" in chunk:  # a failed stream's last frame
        assert set(chunk) == {"error"} and set(chunk["error"]) == ERROR_KEYS, f"{where}: {chunk}"
        return 1
    ChatCompletionChunk.model_validate(chunk)
    return 1
