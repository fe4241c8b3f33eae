"""Background responses over HTTP: creating a job, and streaming its events to readers.

Creation answers at once with the queued response (JSON), or attaches the
caller as the job's first reader (`stream:true`): the stream starts with
`response.created` and `response.queued`. A reader replays the job's
retained events after its cursor, then follows live ones; leaving frees its
reader slot and nothing else. Cursors are checked before streaming: a future
one is a 400, one whose events are gone a 410 (a response known only from
the store, its events not retained, is `ResponseRecords.streamable`'s 409).
The job's event log keeps the event objects; each reader encodes them to SSE
as it sends them.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import AsyncIterator, Callable

import orjson
from starlette.responses import Response

from ...errors import GoneError, InvalidRequestError, StorageCapacityError
from ...neutral.events import PipelineEvent
from ...http.shutdown import shutdown_error
from ...http.sse import EventStreamResponse, encode_event
from ...util.kept_json import dumps_kept
from ..assembly.assembler import ResponseAssembler
from .event_log import LoggedEvent
from .manager import Job, JobManager
from ..persistence.stored_turn import StoredTurn

WRITE_BYTES = 65536
"""The most bytes of frames one write joins (a single larger event is written alone): a reader that replays a
long log sends it in pieces the stream's write timeout was meant for."""


async def start_job(
    jobs: JobManager,
    assembler: ResponseAssembler,
    turn: StoredTurn,
    generate: Callable[[], AsyncIterator[PipelineEvent]],
    *,
    stream: bool,
    request: bytes = b"",
) -> Response:
    """Admit the job (429/503/413 refuse it; the caller's `with` then releases the turn) and answer its
    creation. Once admitted, the job holds the turn: `JobManager._finish` releases it. `request`: the validated
    request's JSON, kept with a shared record so that another replica can take the task over; it counts
    towards `JOB_INPUT_BYTES` with the history."""
    settings = jobs.settings
    history = dumps_kept(turn.input_history())
    size = len(history) + len(orjson.dumps(assembler.snapshot())) + len(request)
    if size > settings.job_input_bytes:
        raise StorageCapacityError(
            f"This background request's input snapshot takes {size} bytes, over the limit of "
            f"{settings.job_input_bytes} bytes per task. Run it in the foreground or shorten its history.",
        )
    job = Job(assembler.id, turn.owner, assembler, jobs.new_log(assembler.id, assembler), generate, turn, history,
              request=request, prior_count=len(turn.history))
    reading = ExitStack()
    if stream:  # the reader slot first: a 429 for readers must not leave a job behind
        reading.enter_context(jobs.reader(turn.owner))
    try:
        await jobs.admit(job)
        turn.hand_over()
    except BaseException:
        reading.close()  # a refused job frees its reader slot
        raise
    if not stream:
        return Response(orjson.dumps(job.snapshot()), media_type="application/json")
    return _reader(jobs, job, -1, reading)


def stream_job(jobs: JobManager, job: Job, starting_after: str | None) -> Response:
    """`GET /v1/responses/{id}?stream=true[&starting_after=n]` for a retained job."""
    cursor = _cursor(starting_after)
    problem = job.log.check_cursor(cursor)
    if problem == "future":
        raise InvalidRequestError(
            f"'starting_after' is {cursor}, but the last event of this response so far is {job.log.last}.",
            param="starting_after",
        )
    if problem == "expired":
        raise GoneError(
            f"Events after sequence number {cursor} are no longer retained (the oldest kept is "
            f"{job.log.first_retained}). Retrieve the response without streaming for its current state.",
            param="starting_after",
        )
    reading = ExitStack()
    reading.enter_context(jobs.reader(job.owner))
    return _reader(jobs, job, cursor, reading)


def _reader(jobs: JobManager, job: Job, cursor: int, reading: ExitStack) -> Response:
    """The SSE response of one admitted reader; its slot is freed when the stream ends. A reader of a job this
    server runs ends with the job, which its shutdown cancels; one of a job another replica runs (Redis) ends
    at this server's shutdown with the `error` event `server_shutdown`, numbered like a lagging reader's error,
    and reconnects through another replica after the last event it got."""
    if jobs.runs_here(job.id):
        events, farewell = job.log.batches(cursor), None
    else:  # the farewell is this reader's: numbered from where it stands (its creator's stream too)
        reader = job.log.reader(cursor)
        events, farewell = reader.batches(cursor), (lambda: _farewell(reader))
    return EventStreamResponse(_frames(events), on_close=reading.close, farewell=farewell,
                               write_timeout=jobs.settings.stream_timeout_s, keepalive=jobs.keepalive_s)


async def _farewell(reader) -> bytes:
    error = shutdown_error()
    event = {"type": "error", "sequence_number": await reader.farewell_sequence(), "code": error.code,
             "message": error.message, "param": error.param}
    return encode_event(event, "error")


async def _frames(batches: AsyncIterator[list[LoggedEvent]]) -> AsyncIterator[bytes]:
    """The log's events as SSE frames, framed as this reader sends them (the log keeps each event's JSON). The
    events that came together (on Redis, a flush's) go out in one write of up to `WRITE_BYTES`, not one write
    each: a write costs the server far more than framing an event. Closing the frames closes the reader's cursor
    with them."""
    try:
        async for batch in batches:
            chunk: list[bytes] = []
            size = 0
            for event in batch:
                frame = encode_event(event.json, event.type)
                if chunk and size + len(frame) > WRITE_BYTES:
                    yield b"".join(chunk)
                    chunk, size = [], 0
                chunk.append(frame)
                size += len(frame)
            yield b"".join(chunk)
    finally:
        await batches.aclose()


def _cursor(raw: str | None) -> int:
    if raw is None:
        return -1
    try:
        cursor = int(raw)
    except ValueError:
        cursor = -1
    if cursor < 0:
        raise InvalidRequestError(
            f"Invalid value for 'starting_after': {raw!r}. It must be a nonnegative integer.", param="starting_after"
        )
    return cursor
