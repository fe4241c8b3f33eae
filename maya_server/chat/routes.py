"""POST /v1/chat/completions."""

from __future__ import annotations

from typing import AsyncIterator

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from ..generation import Failed, GenerationService, PreparedGeneration
from ..http.disconnect import ClientGone, until_disconnected
from ..http.errors import error_response
from ..http.sse import EventStreamResponse, encode_event
from ..validation import parse_json_object
from .assembler import ChatAssembler
from .convert import to_conversation, to_settings
from .request import parse_chat_request


def chat_router(service: GenerationService, model_name: str) -> APIRouter:
    router = APIRouter()

    @router.post("/v1/chat/completions")
    async def create_chat_completion(request: Request) -> Response:
        body, messages = parse_chat_request(parse_json_object(await request.body()))
        prepared = service.prepare(to_conversation(body, messages), to_settings(body))
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        assembler = ChatAssembler(model_name, include_usage=include_usage)
        if body.stream:
            return EventStreamResponse(_stream(service, prepared, assembler))
        try:
            await until_disconnected(request, _drain(service, prepared, assembler))
        except ClientGone:
            return Response(status_code=499)  # nobody is listening; the engine was stopped
        if assembler.failure is not None:
            return error_response(assembler.failure.error)
        return Response(orjson.dumps(assembler.completion()), media_type="application/json")

    return router


async def _drain(service: GenerationService, prepared: PreparedGeneration, assembler: ChatAssembler) -> None:
    async for event in service.run(prepared):
        assembler.on_event(event)


async def _stream(service: GenerationService, prepared: PreparedGeneration, assembler: ChatAssembler) -> AsyncIterator[bytes]:
    yield encode_event(assembler.opening_chunk())
    async for event in service.run(prepared):
        for chunk in assembler.on_event(event):
            yield encode_event(chunk)
        if isinstance(event, Failed):
            yield encode_event(event.error.body())
            return
    yield encode_event("[DONE]")
