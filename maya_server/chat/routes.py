"""POST /v1/chat/completions."""

from __future__ import annotations

from typing import AsyncIterator

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from ..generation import Failed, GenerationService
from ..http.disconnect import ClientGone, until_disconnected
from ..http.errors import error_response
from ..http.sse import EventStreamResponse, encode_event
from ..mcp.hub import McpHub
from ..validation import parse_json_object
from .assembler import ChatAssembler
from .convert import to_conversation, to_settings
from .mcp_loop import McpToolLoop, offer_mcp_tools
from .request import parse_chat_request


def chat_router(service: GenerationService, model_name: str, hub: McpHub, mcp_max_rounds: int) -> APIRouter:
    """`hub` holds the operator's MCP servers, whose tools requests with `strata_mcp: true` are offered."""
    router = APIRouter()

    @router.post("/v1/chat/completions")
    async def create_chat_completion(request: Request) -> Response:
        body, messages = parse_chat_request(parse_json_object(await request.body()))
        conversation, settings = to_conversation(body, messages), to_settings(body)
        if body.strata_mcp:
            conversation, tools = await offer_mcp_tools(hub, conversation)
            events = McpToolLoop(service, hub, tools, mcp_max_rounds).run(service.prepare(conversation, settings), settings)
        else:
            events = service.run(service.prepare(conversation, settings))
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        assembler = ChatAssembler(model_name, include_usage=include_usage, mcp=bool(body.strata_mcp))
        if body.stream:
            return EventStreamResponse(_stream(events, assembler))
        try:
            await until_disconnected(request, _drain(events, assembler))
        except ClientGone:
            return Response(status_code=499)  # nobody is listening; the engine (or MCP call) was stopped
        if assembler.failure is not None:
            return error_response(assembler.failure.error)
        return Response(orjson.dumps(assembler.completion()), media_type="application/json")

    return router


async def _drain(events: AsyncIterator, assembler: ChatAssembler) -> None:
    async for event in events:
        assembler.on_event(event)


async def _stream(events: AsyncIterator, assembler: ChatAssembler) -> AsyncIterator[bytes]:
    yield encode_event(assembler.opening_chunk())
    async for event in events:
        for chunk in assembler.on_event(event):
            yield encode_event(chunk)
        if isinstance(event, Failed):
            yield encode_event(event.error.body())
            return
    yield encode_event("[DONE]")
