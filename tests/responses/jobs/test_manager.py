"""The job manager on its own: shutdown honesty and cleanup before a terminal state."""

from __future__ import annotations

import asyncio

import pytest

from maya_server.errors import JobCleanupError
from maya_server.neutral.events import Finished, TextDelta, Usage
from maya_server.responses.assembly.assembler import ResponseAssembler
from maya_server.responses.jobs.event_log import EventLog
from maya_server.responses.jobs.manager import Job, JobManager
from maya_server.responses.request.request import parse_responses_request
from maya_server.responses.settings import ResponsesSettings


class Turn:
    owner = "owner"

    def __init__(self) -> None:
        self.released = 0

    def release(self) -> None:
        self.released += 1


def make_job(generate) -> Job:
    request = parse_responses_request({"model": "m", "input": "hi", "store": True, "background": True})
    assembler = ResponseAssembler(request, model="m")
    return Job(assembler.id, "owner", assembler, EventLog(100, 100_000, assembler.reserve_sequence), generate, Turn(), b"[]")


def endless(cleanup_seconds: float, log: list):
    """A generation that never ends by itself and takes `cleanup_seconds` to release the engine."""

    async def generate():
        try:
            while True:
                yield TextDelta("x")
                await asyncio.sleep(0.01)
        finally:
            log.append("cleanup started")
            await asyncio.sleep(cleanup_seconds)
            log.append("cleanup finished")

    return generate


def test_shutdown_cancels_running_and_queued_jobs_after_cleanup():
    async def scenario():
        manager = JobManager(ResponsesSettings(job_workers=1), shutdown_wait_s=5)
        log: list = []
        running, queued = make_job(endless(0.05, log)), make_job(endless(0, log))
        await manager.admit(running)
        await manager.admit(queued)
        await asyncio.sleep(0.05)
        await manager.shutdown()
        return running, queued, log

    running, queued, log = asyncio.run(scenario())
    assert (running.state, queued.state) == ("cancelled", "cancelled")
    assert log == ["cleanup started", "cleanup finished"]  # the queued job never generated
    assert running.turn.released >= 1 and queued.turn.released >= 1


def test_shutdown_raises_when_the_backend_does_not_release_in_time():
    async def scenario():
        manager = JobManager(ResponsesSettings(job_workers=1), shutdown_wait_s=0.2)
        log: list = []
        job = make_job(endless(30, log))
        await manager.admit(job)
        await asyncio.sleep(0.05)
        with pytest.raises(JobCleanupError, match="did not finish cleaning up"):
            await manager.shutdown()
        return job, log

    job, log = asyncio.run(scenario())
    assert job.state == "in_progress"  # never claimed cancelled while the backend holds it
    assert log == ["cleanup started"]


def test_cancel_waits_for_cleanup_before_publishing_cancelled():
    async def scenario():
        manager = JobManager(ResponsesSettings(job_workers=1))
        log: list = []
        job = make_job(endless(0.2, log))
        await manager.admit(job)
        await asyncio.sleep(0.05)
        snapshot = await manager.cancel(job)
        return job, snapshot, log

    job, snapshot, log = asyncio.run(scenario())
    assert snapshot["status"] == "cancelled" and job.state == "cancelled"
    assert log == ["cleanup started", "cleanup finished"]


def test_cancel_returns_in_progress_when_cleanup_is_slower_than_the_wait(monkeypatch):
    monkeypatch.setattr("maya_server.responses.jobs.manager.CANCEL_WAIT_S", 0.1)

    async def scenario():
        manager = JobManager(ResponsesSettings(job_workers=1))
        log: list = []
        job = make_job(endless(0.5, log))
        await manager.admit(job)
        await asyncio.sleep(0.05)
        first = await manager.cancel(job)
        await job.done.wait()
        return first, job

    first, job = asyncio.run(scenario())
    assert first["status"] == "in_progress"
    assert job.state == "cancelled"


def test_a_finished_job_records_its_terminal_state_once():
    async def scenario():
        manager = JobManager(ResponsesSettings(job_workers=1))

        async def generate():
            yield TextDelta("done")
            yield Finished("stop", Usage(1, 0, 1, 0))

        job = make_job(generate)
        await manager.admit(job)
        await asyncio.wait_for(job.done.wait(), 1)
        again = await manager.cancel(job)
        return job, again, manager.stats()

    job, again, stats = asyncio.run(scenario())
    assert job.state == "completed" and again["status"] == "completed"
    assert stats["finished"] == {"completed": 1} and stats["cancellations"] == 0


def test_a_queued_job_fails_at_its_deadline_without_generating():
    async def scenario():
        manager = JobManager(ResponsesSettings(job_workers=1, job_timeout_s=1))
        log: list = []
        first = make_job(endless(0.5, log))  # its cleanup keeps the only worker busy past the second's deadline
        await manager.admit(first)
        await asyncio.sleep(0.1)
        second = make_job(endless(0, log))
        await manager.admit(second)
        await asyncio.wait_for(second.done.wait(), 3)
        await asyncio.wait_for(first.done.wait(), 3)
        return first, second, log

    first, second, log = asyncio.run(scenario())
    assert (first.state, second.state) == ("failed", "failed")
    assert log == ["cleanup started", "cleanup finished"]  # only the first job ever generated
    assert second.snapshot()["error"]["message"].startswith("The background response did not finish")
