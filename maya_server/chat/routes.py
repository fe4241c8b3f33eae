"""POST /v1/chat/completions."""

from __future__ import annotations

from typing import AsyncIterator

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from ..http.drain import answer_json, stream_frames
from ..neutral.events import Failed, PipelineEvent
from ..pipeline.generation import GenerationService
from ..http.body import BodyLimits, read_json
from ..http.errors import error_response
from ..http.image_loading import load_admitted
from ..http.shutdown import shutdown_error
from ..http.sse import EventStreamResponse, encode_event
from ..mcp.hub import McpHub
from ..structured.gate import gated, publish_gate
from .assembler import ChatAssembler
from .convert import to_conversation, to_settings
from .mcp_loop import McpToolLoop, offer_mcp_tools
from .request import parse_chat_request
from .structured import check_strict_tools, parse_response_format


def chat_router(
    service: GenerationService, model_name: str, limits: BodyLimits, hub: McpHub, *, mcp_max_rounds: int,
    keepalive_s: float,
) -> APIRouter:
    """`hub` holds the operator's MCP servers, whose tools requests with `strata_mcp: true` are offered;
    `keepalive_s`: while a stream's output is held for validation, the longest silence before a comment line."""
    router = APIRouter()

    @router.post("/v1/chat/completions")
    async def create_chat_completion(request: Request) -> Response:
        (body, messages), large = await read_json(request, limits, parse_chat_request)
        service.check_effort(body.reasoning_effort, "reasoning_effort")
        output_format = parse_response_format(body.response_format)
        check_strict_tools(body)
        conversation, settings = to_conversation(body, messages, output_format=output_format), to_settings(body)
        gate = publish_gate(conversation, output_format)
        # a request with images is admitted before they load; a full queue is a 429 before any byte of a stream
        conversation, admission = await load_admitted(request, service, conversation)
        try:
            tools = None
            if body.strata_mcp:
                conversation, tools = await offer_mcp_tools(hub, conversation)
            prepared = await service.prepare_async(conversation, settings, large=large, owner=request.state.owner)
        except BaseException:
            if admission is not None:
                admission.release()
            raise
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        assembler = ChatAssembler(model_name, include_usage=include_usage, mcp=bool(body.strata_mcp))
        admission = admission or service.admit()
        if tools is None:
            events = gated(service.run(prepared, admission), gate)
        else:
            events = gated(McpToolLoop(service, hub, tools, mcp_max_rounds, owner=request.state.owner).run(
                prepared, settings, admission), gate)
        if body.stream:
            return EventStreamResponse(_stream(events, assembler), on_close=admission.release,
                                       farewell=lambda: encode_event(shutdown_error().body()),
                                       keepalive=keepalive_s if gate.active else None)
        # a client gone is a 499: the drain is cancelled, which stops the engine (or the MCP call)
        return await answer_json(request, events, assembler.on_event, on_close=admission.release,
                                 answer=lambda: _answer(assembler))

    return router


def _answer(assembler: ChatAssembler) -> Response:
    if assembler.failure is not None:
        return error_response(assembler.failure.error)
    return Response(orjson.dumps(assembler.completion()), media_type="application/json")


def _stream(events: AsyncIterator[PipelineEvent], assembler: ChatAssembler) -> AsyncIterator[bytes]:
    """The chunks, each as a `data:` line; a failure ends the stream with its error object, a success
    with `[DONE]`."""

    def frames(event: PipelineEvent) -> list[bytes]:
        chunks = [encode_event(chunk) for chunk in assembler.on_event(event)]
        return chunks + [encode_event(event.error.body())] if isinstance(event, Failed) else chunks

    return stream_frames(events, frames, opening=lambda: [encode_event(assembler.opening_chunk())],
                         closing=lambda: [] if assembler.failure is not None else [encode_event("[DONE]")])
