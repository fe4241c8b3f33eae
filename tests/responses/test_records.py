"""`ResponseRecords` on its own: where a response is found, and what each operation answers.

A response lives in a retained background job record, in the store, or both; every outcome is read as a
user sees it: found (the body), or an error whose status and OpenAI code the routes answer with unchanged.
"""

from __future__ import annotations

import asyncio

import orjson
import pytest

from maya_server.errors import ConflictError, InvalidRequestError, MayaError, NotFoundError
from maya_server.neutral.events import Finished, TextDelta, Usage
from maya_server.responses.assembly.assembler import ResponseAssembler
from maya_server.responses.jobs.event_log import EventLog
from maya_server.responses.jobs.manager import Job, JobManager
from maya_server.responses.endpoints.records import ResponseRecords
from maya_server.responses.settings import ResponsesSettings
from maya_server.responses.store.memory import MemoryStore

from tests.responses.helpers import parse
from tests.responses.store.test_core import answer, item, response

ALICE, BOB = "alice-key-hash", "bob-key-hash"


class Turn:
    """The job's stored turn, as far as the job manager needs it."""

    def release(self) -> None:
        pass


def make_records() -> ResponseRecords:
    """Records whose store holds Alice's completed, foreground `r1` (input `u1`, output `m1`)."""
    settings = ResponsesSettings(job_workers=1)
    records = ResponseRecords(JobManager(settings), MemoryStore(settings))
    records.store.core.put(ALICE, response("r1", answer("m1")), [item("u1")])
    return records


async def background(records: ResponseRecords, owner: str, generate, history: list[dict] | None = None) -> Job:
    """Admit a background job of `owner` whose input history is `history`. Nothing saves it to the store, as
    when the store has evicted its copy while the record is retained."""
    assembler = ResponseAssembler(parse(input="hi", background=True, store=True), model="m")
    job = Job(assembler.id, owner, assembler, EventLog(100, 100_000, assembler.reserve_sequence), generate, Turn(),
              orjson.dumps(history if history is not None else [item("b1", "hi")]))
    await records.jobs.admit(job)
    return job


async def started(job: Job) -> None:
    """Until a worker runs the job (its state is then `in_progress`)."""
    for _ in range(500):
        if job.state == "in_progress":
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"job {job.id} never started: {job.state}")


def endless():
    async def generate():
        while True:
            yield TextDelta("x")
            await asyncio.sleep(0.01)

    return generate


def short(text: str = "done"):
    async def generate():
        yield TextDelta(text)
        yield Finished("stop", Usage(1, 0, 1, 0))

    return generate


async def refused(error: type[MayaError], status: int, code: str, call, *args, **kwargs) -> MayaError:
    """The error a call raises, checked as the client sees it: its status and OpenAI-shaped body."""
    with pytest.raises(error) as caught:
        await call(*args, **kwargs)
    body = caught.value.body()["error"]
    assert caught.value.status == status and body["code"] == code and body["type"] == "invalid_request_error"
    return caught.value


def test_a_stored_response_is_retrieved_from_the_store():
    records = make_records()
    found = asyncio.run(records.retrieve(ALICE, "r1"))
    assert found["id"] == "r1" and found["output"][0]["id"] == "m1"


def test_a_running_background_job_is_retrieved_live_and_streamable():
    async def scenario():
        records = make_records()
        job = await background(records, ALICE, endless())
        await started(job)
        live = await records.retrieve(ALICE, job.id)
        streamed = await records.streamable(ALICE, job.id)
        await records.jobs.shutdown()
        return job, live, streamed

    job, live, streamed = asyncio.run(scenario())
    assert live["id"] == job.id and live["status"] == "in_progress"
    assert streamed is job


def test_a_response_known_only_from_the_store_cannot_be_streamed():
    records = make_records()
    error = asyncio.run(refused(ConflictError, 409, "conflict", records.streamable, ALICE, "r1"))
    assert error.param == "stream"
    asyncio.run(refused(NotFoundError, 404, "not_found", records.streamable, ALICE, "unknown"))


def test_continuing_a_running_job_is_a_409_and_a_cancelled_one_a_400():
    async def scenario():
        records = make_records()
        job = await background(records, ALICE, endless())
        await started(job)
        running = await refused(ConflictError, 409, "conflict",
                          records.open_turn, ALICE, parse(previous_response_id=job.id, input="next"))
        cancelled = await records.cancel(ALICE, job.id)
        after = await refused(InvalidRequestError, 400, None,
                        records.open_turn, ALICE, parse(previous_response_id=job.id, input="next"))
        return running, cancelled, after

    running, cancelled, after = asyncio.run(scenario())
    assert running.param == "previous_response_id" and "in_progress" in running.message
    assert cancelled["status"] == "cancelled"
    assert after.param == "previous_response_id" and "cancelled" in after.message


def test_continuing_prefers_the_stored_copy_and_falls_back_to_the_job_record():
    async def scenario():
        records = make_records()
        job = await background(records, ALICE, short("answer"))
        await asyncio.wait_for(job.done.wait(), 1)
        with await records.open_turn(ALICE, parse(previous_response_id="r1", input="next")) as stored:
            from_store = [entry["id"] for entry in stored.history]
        with await records.open_turn(ALICE, parse(previous_response_id=job.id, input="next")) as carried:
            from_record = [entry["id"] for entry in carried.history]
            carried_again = [entry["id"] for entry in carried.carried]
        return job, from_store, from_record, carried_again

    job, from_store, from_record, carried_again = asyncio.run(scenario())
    assert from_store == ["u1", "m1"]
    # no store copy (as after an eviction; nothing saves here): the record's history, input then output, is
    # continued, and stored again with the turn
    assert from_record[0] == "b1" and len(from_record) == 2 and from_record == carried_again


def test_continuing_an_unknown_response_is_a_404():
    records = make_records()
    asyncio.run(refused(NotFoundError, 404, "not_found", records.open_turn, ALICE,
                        parse(previous_response_id="nope", input="x")))


def test_input_items_page_through_the_store_and_a_job_record():
    async def scenario():
        records = make_records()
        records.store.core.put(ALICE, response("r2", answer("m2")), [item("a"), item("b"), item("c")])
        job = await background(records, ALICE, endless(), history=[item("j1"), item("j2")])
        newest = await records.input_items(ALICE, "r2", order="desc", limit=2, after=None)
        rest = await records.input_items(ALICE, "r2", order="desc", limit=2, after="b")
        from_job = await records.input_items(ALICE, job.id, order="asc", limit=20, after=None)
        bad_after = await refused(InvalidRequestError, 400, None,
                            records.input_items, ALICE, "r2", order="asc", limit=20, after="zzz")
        await records.jobs.shutdown()
        return newest, rest, from_job, bad_after

    newest, rest, from_job, bad_after = asyncio.run(scenario())
    assert [d["id"] for d in newest["data"]] == ["c", "b"] and newest["has_more"] is True
    assert (newest["object"], newest["first_id"], newest["last_id"]) == ("list", "c", "b")
    assert [d["id"] for d in rest["data"]] == ["a"] and rest["has_more"] is False
    assert [d["id"] for d in from_job["data"]] == ["j1", "j2"]
    assert bad_after.param == "after"


def test_delete_forgets_both_copies_and_refuses_a_running_job():
    async def scenario():
        records = make_records()
        running = await background(records, ALICE, endless())
        await started(running)
        active = await refused(ConflictError, 409, "conflict", records.delete, ALICE, running.id)
        await records.cancel(ALICE, running.id)
        await records.delete(ALICE, running.id)
        gone = await refused(NotFoundError, 404, "not_found", records.retrieve, ALICE, running.id)
        await records.delete(ALICE, "r1")
        again = await refused(NotFoundError, 404, "not_found", records.delete, ALICE, "r1")
        return active, gone, again, records.store.stats()

    active, gone, again, stats = asyncio.run(scenario())
    assert "cancel it before deleting" in active.message
    assert stats["entries"] == 0


def test_cancel_answers_a_finished_background_response_as_it_is_and_refuses_a_foreground_one():
    async def scenario():
        records = make_records()
        job = await background(records, ALICE, short())
        await asyncio.wait_for(job.done.wait(), 1)
        again = await records.cancel(ALICE, job.id)
        try:
            await records.cancel(ALICE, "r1")
        except InvalidRequestError as error:
            return again, error

    again, error = asyncio.run(scenario())
    assert again["status"] == "completed"
    assert error.status == 400 and "Only background responses" in error.message


def test_another_key_sees_nothing_of_a_response():
    async def scenario():
        records = make_records()
        job = await background(records, ALICE, short())
        await asyncio.wait_for(job.done.wait(), 1)
        for response_id in ("r1", job.id):
            await refused(NotFoundError, 404, "not_found", records.retrieve, BOB, response_id)
            await refused(NotFoundError, 404, "not_found", records.streamable, BOB, response_id)
            await refused(NotFoundError, 404, "not_found", records.delete, BOB, response_id)
            await refused(NotFoundError, 404, "not_found",
                    records.input_items, BOB, response_id, order="asc", limit=20, after=None)
            await refused(NotFoundError, 404, "not_found",
                    records.open_turn, BOB, parse(previous_response_id=response_id, input="x"))
            with pytest.raises(NotFoundError):
                await records.cancel(BOB, response_id)
        return await records.retrieve(ALICE, "r1"), await records.retrieve(ALICE, job.id)

    alices = asyncio.run(scenario())
    assert [found["id"] for found in alices][0] == "r1"  # the owner still finds both
    assert alices[1]["status"] == "completed"
