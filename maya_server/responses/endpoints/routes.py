"""POST /v1/responses: validate, convert, generate, assemble; JSON or SSE.

Everything that can be refused is refused before the engine is touched:
request validation, unsupported features, the stored history it continues
(404/503), conversion (call/result matching, images), the context check and
the engine queue's admission (429) all raise first. A `store:true` response is saved before its terminal event.

Three answer modes, each its own function: `background:true` becomes a job (`answer_background`, then
`jobs/over_http.py`, `jobs/manager.py`), never admitted here; otherwise the generation is admitted now and answered as
SSE (`_answer_stream`) or JSON (`_answer_json`). The continued history and its refusals come from
`ResponseRecords.open_turn` (`records.py`).

A save the store cannot take (`StoreUnavailableError`: Redis went away after the request was let in) fails
the response before its terminal event. A stream has already begun: it ends with `error` and `response.failed`.
A JSON answer has sent nothing yet: it is the 503 `store_unavailable` that the requests after it get before
generating (and that the OpenAI SDKs retry), not a 200 whose status is `failed` (`JsonSave`).
"""

from __future__ import annotations

from typing import AsyncIterator, Awaitable

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from ...engine.fifo import Admission
from ...neutral.conversation import image_parts
from ...http.drain import answer_json, stream_frames
from ...errors import InvalidRequestError, StoreUnavailableError
from ...neutral.events import PipelineEvent
from ...pipeline.generation import GenerationService
from ...http.body import BodyLimits, read_json
from ...http.image_loading import load_admitted
from ...http.shutdown import shutdown_error
from ...http.sse import EventStreamResponse, encode_event
from ..assembly.assembler import ResponseAssembler
from ..jobs.over_http import start_job
from ..background.worker_generation import in_worker
from ..conversion.convert import to_conversation, to_settings
from ...structured.gate import gated, publish_gate
from .records import ResponseRecords
from ..request.request import ResponsesRequest, parse_responses_request
from ..persistence.stored_turn import StoredTurn


def responses_router(
    service: GenerationService, records: ResponseRecords, model_name: str, limits: BodyLimits,
    *, keepalive_s: float,
) -> APIRouter:
    """`keepalive_s`: while a stream's output is held for validation, the longest silence before a comment line."""
    router = APIRouter()

    @router.post("/v1/responses")
    async def create_response(request: Request) -> Response:
        """One of three answers, chosen by the body: a background job, an SSE stream or a JSON body.
        Leaving the `with` releases the turn unless the stream or job that was returned took it."""
        sent: list[dict] = []

        def validate(data: dict) -> ResponsesRequest:
            sent.append(data)  # kept as JSON with a background task, for another replica to take it over
            parsed = parse_responses_request(data)
            service.check_effort(parsed.effort, "reasoning.effort")  # before the store is read or written
            return parsed

        body, large = await read_json(request, limits, validate)
        with await records.open_turn(request.state.owner, body) as turn:
            if body.background:
                return await answer_background(body, large, turn, orjson.dumps(sent[0]))
            return await answer_foreground(request, body, large, turn)

    async def answer_background(body: ResponsesRequest, large: bool, turn: StoredTurn, sent: bytes) -> Response:
        """A job, answered at once (JSON) or streamed to its first reader. Nothing is admitted to the engine
        here: a worker takes the job's place when it starts it, and waits however full the queue is. A job
        with images has what can be refused without fetching refused now; its worker loads them and
        prepares (`responses/background/worker_generation.py`)."""
        settings = to_settings(body)
        conversation = to_conversation(body, prior=turn.prior)
        service.check_images(conversation)
        prepared = None
        if not image_parts(conversation):
            prepared = await service.prepare_async(conversation, settings, context_param="input", large=large,
                                                   owner=turn.owner)
        assembler = ResponseAssembler(body, model=model_name, on_finish=turn.save if body.stored else None,
                                      on_unsaved=turn.not_saved)
        gate = publish_gate(conversation, body.output_format)
        keep = lambda images: records.jobs.keep_images(assembler.id, images)  # noqa: E731
        generate = lambda: gated(in_worker(service, conversation, settings, prepared, turn.owner,  # noqa: E731
                                           keep_images=keep), gate)
        return await start_job(records.jobs, assembler, turn, generate, stream=bool(body.stream), request=sent)

    async def answer_foreground(request: Request, body: ResponsesRequest, large: bool, turn: StoredTurn) -> Response:
        """A generation admitted to the engine queue now (a full queue is a 429 here, before any byte of a
        stream), answered as SSE (`stream:true`) or as one JSON body."""
        settings = to_settings(body)
        conversation = to_conversation(body, prior=turn.prior)
        conversation, admission = await load_admitted(request, service, conversation)  # images, once admitted
        try:
            prepared = await service.prepare_async(conversation, settings, context_param="input", large=large,
                                                   owner=turn.owner)
        except BaseException:
            if admission is not None:
                admission.release()
            raise
        admission = admission or service.admit()
        save = (turn.save if body.stream else JsonSave(turn)) if body.stored else None
        assembler = ResponseAssembler(body, model=model_name, on_finish=save, on_unsaved=turn.not_saved)
        gate = publish_gate(conversation, body.output_format)
        events = gated(service.run(prepared, admission), gate)
        if body.stream:
            keepalive = keepalive_s if gate.active else None  # comments only while output is held
            return _answer_stream(assembler, events, admission, turn, keepalive_s=keepalive)
        return await _answer_json(request, assembler, events, admission, save)

    @router.post("/v1/responses/compact")
    async def compact_response() -> Response:
        raise InvalidRequestError(
            "Compaction is not supported: Maya does not compact context on the server. Send the history you "
            "want the model to see in 'input', or continue a stored response with 'previous_response_id'.",
            code="unsupported_endpoint",
        )

    return router


def _answer_stream(assembler: ResponseAssembler, events: AsyncIterator[PipelineEvent], admission: Admission,
                   turn: StoredTurn, *, keepalive_s: float | None) -> Response:
    """The SSE answer. The turn is handed over to the stream: its `on_close` releases the admission and
    the turn, however the stream ends (done, client gone, shutdown: then the farewell ends it)."""
    turn.hand_over()

    def release() -> None:
        if not assembler.finished:  # the client left (a shutdown's farewell has finished it)
            turn.not_saved(assembler.id, "abandoned")
        admission.release()
        turn.release()

    return EventStreamResponse(_stream(assembler, events), on_close=release,
                               farewell=lambda: _encoded(assembler.interrupted(shutdown_error())),
                               keepalive=keepalive_s)


class JsonSave:
    """The save of a non-streamed `store:true` response: the turn's, remembering a store that could not be
    reached, so that the answer is that 503 rather than the failed response (nothing was sent yet)."""

    def __init__(self, turn: StoredTurn) -> None:
        self.turn = turn
        self.unavailable: StoreUnavailableError | None = None

    async def __call__(self, snapshot: dict) -> None:
        try:
            await self.turn.save(snapshot)
        except StoreUnavailableError as exc:
            self.unavailable = exc
            raise


async def _answer_json(request: Request, assembler: ResponseAssembler, events: AsyncIterator[PipelineEvent],
                       admission: Admission, save: JsonSave | None) -> Response:
    """The JSON answer: the response once generated, or the 503 of a store that could not take it. A client
    gone is a 499: the drain is cancelled, which stops the engine; the caller's `with` then releases the turn."""
    def answer() -> Response:
        if save is not None and save.unavailable is not None:
            raise save.unavailable
        return Response(orjson.dumps(assembler.snapshot()), media_type="application/json")

    return await answer_json(request, events, assembler.deliver, on_close=admission.release, answer=answer)


def _encoded(events: list[dict]) -> bytes:
    return b"".join(_frames(events))


def _frames(events: list[dict]) -> list[bytes]:
    """Each Responses event as an SSE frame named by its type."""
    return [encode_event(event, event["type"]) for event in events]


def _stream(assembler: ResponseAssembler, events: AsyncIterator[PipelineEvent]) -> AsyncIterator[bytes]:
    def frames(event: PipelineEvent) -> list[bytes] | Awaitable[list[bytes]]:
        delivered = assembler.deliver(event)
        return _frames(delivered) if isinstance(delivered, list) else _saved_frames(delivered)

    return stream_frames(events, frames, opening=lambda: _frames(assembler.opening()), closing=list)


async def _saved_frames(delivered: Awaitable[list[dict]]) -> list[bytes]:
    """The frames of the event that saved the response, once the save is over."""
    return _frames(await delivered)
