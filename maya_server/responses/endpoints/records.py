"""Response records: the one place that knows a response can live in two places.

A response is found in a retained background job record (`JobManager`, in this
process; `RedisJobManager` on Redis, shared by the fleet: its live snapshot, its
events, its input history) or in the response store
(`ResponseStore`: what `store:true` saved). The two overlap: a background job
stored on completion is in both until its record expires, and a record can
outlive the store's copy (evicted, TTL). The policy is decided here, once:

- retrieve: the job record first (it is the live state), then the store;
- stream: only a job record has events; a response known only from the store is
  a 409, an unknown one a 404;
- continue (`previous_response_id`): a running job is a 409, a cancelled or
  failed one a 400; otherwise the store's copy (pinned for the turn), else the
  record's history, which the turn then stores again;
- input items: the store's, else the record's;
- delete: both copies; a running job is a 409;
- cancel: a retained job is cancelled; a finished background response from the
  store answers as it is; any other response is a 400.

Every lookup is scoped to the caller's key (a hash): another key's, expired,
evicted, deleted and unknown ids are all the same 404. A `store:true` response
that ended unsaved (failed, cancelled, its client gone) is a 404 that says so
(`UnstoredResponses`), for its own key only. Errors are `MayaError`s
(OpenAI-shaped codes); translating to HTTP is the routes' part, so this module
and what it owns never import the HTTP layer.
"""

from __future__ import annotations

import asyncio
from contextlib import contextmanager
from typing import Awaitable, Iterator

import orjson

from ...errors import ConflictError, InvalidRequestError, NotFoundError
from ..jobs.manager import Job, JobManager
from ..request.request import ResponsesRequest
from ..store.interface import ResponseStoreBackend, StoredHistory
from ..persistence.stored_turn import StoredTurn
from ..persistence.unstored import UnstoredResponses
from ...util.echoed import echoed


class ResponseRecords:
    """Owns the background job records and the response store; see the module docstring for the policy."""

    def __init__(self, jobs: JobManager, store: ResponseStoreBackend, unstored: UnstoredResponses | None = None) -> None:
        self.jobs = jobs
        self.store = store
        self.unstored = unstored or UnstoredResponses()

    @contextmanager
    def _explained(self, owner: str, response_id: str) -> Iterator[None]:
        """A 404 for an id this owner asked to store and that ended unsaved says so, instead of the general hint."""
        try:
            yield
        except NotFoundError as exc:
            why = self.unstored.explain(owner, response_id)
            if why is None:
                raise
            raise NotFoundError(why, param=exc.param) from None

    async def retrieve(self, owner: str, response_id: str) -> dict:
        """The response as its owner sees it now: a retained job's live snapshot, else the stored copy (404)."""
        job = await self.jobs.find(owner, response_id)
        if job is not None:
            return job.snapshot()
        with self._explained(owner, response_id):
            return await self.store.get(owner, response_id)

    async def streamable(self, owner: str, response_id: str) -> Job:
        """The job whose retained events a reader replays: 404 when unknown, 409 when only stored."""
        job = await self.jobs.find(owner, response_id)
        if job is None:
            with self._explained(owner, response_id):
                await self.store.get(owner, response_id)  # 404 when unknown
            raise ConflictError(
                f"The events of response '{response_id}' are not retained (it is not a background response, "
                "or its record has expired). Retrieve it without 'stream'.",
                param="stream",
            )
        return job

    async def open_turn(self, owner: str, request: ResponsesRequest) -> StoredTurn:
        """This request's stored turn, its continued history chosen and pinned (see `StoredTurn` for who
        releases it). Every refusal of `previous_response_id` comes from here, before generation."""
        base, carried = None, []
        if request.stored:  # a store that cannot take the answer refuses now, not after the generation
            await self.store.ensure_available()
        if request.previous_response_id is not None:
            with self._explained(owner, request.previous_response_id):
                base, carried = await self._continued(owner, request.previous_response_id)
        return StoredTurn(self.store, owner, request, base, carried, unstored=self.unstored)

    async def _continued(self, owner: str, response_id: str) -> tuple[StoredHistory | None, list[dict]]:
        """The store's copy pinned, or (evicted from the store) the retained record's history to carry. With a
        shared store both lookups are round trips: they run at once, and a history pinned for nothing (the job
        refuses, or the request is cancelled) is released."""
        if self.store.backend == "memory":
            job = await self.jobs.find(owner, response_id, history=True)
            if job is not None:
                _check_continuable(job)
            return await _stored_or_carried(job, self.store.begin(owner, response_id))
        begun = asyncio.ensure_future(self.store.begin(owner, response_id))
        try:
            job = await self.jobs.find(owner, response_id, history=True)
            if job is not None:
                _check_continuable(job)
        except BaseException:
            begun.cancel()
            await asyncio.gather(begun, return_exceptions=True)
            if not begun.cancelled() and begun.exception() is None:
                begun.result().release()
            raise
        return await _stored_or_carried(job, begun)

    async def input_items(self, owner: str, response_id: str, *, order: str, limit: int, after: str | None) -> dict:
        """One page of the response's input items (a list object), newest first when `order` is "desc";
        `after` is an item id of that response (400 when it is not one)."""
        with self._explained(owner, response_id):
            items = await self._input_items(owner, response_id)
        if order == "desc":
            items = items[::-1]
        start = _position_after(items, after) if after is not None else 0
        page = items[start : start + limit]
        with self.store.assembling(sum(len(data) for _, data in page)):
            data = [orjson.loads(raw) for _, raw in page]
        return {
            "object": "list", "data": data,
            "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None,
            "has_more": start + limit < len(items),
        }

    async def _input_items(self, owner: str, response_id: str) -> list[tuple[str, bytes]]:
        """(id, JSON) of each input item, oldest first: from the store, else from a retained job record."""
        try:
            return await self.store.input_items(owner, response_id)
        except NotFoundError:
            job = await self.jobs.find(owner, response_id, history=True)
            if job is None:
                raise
            return [(item["id"], orjson.dumps(item)) for item in orjson.loads(job.history)]

    async def delete(self, owner: str, response_id: str) -> None:
        """Forget the response everywhere it is kept: 409 while its job is active, 404 when it is nowhere."""
        had_record = await self.jobs.delete(owner, response_id)  # 409 while the job is active
        try:
            with self._explained(owner, response_id):
                await self.store.delete(owner, response_id)
        except NotFoundError:
            if not had_record:
                raise
        self.unstored.forget(owner, response_id)

    async def cancel(self, owner: str, response_id: str) -> dict:
        """Cancel a background response (idempotent) and return its state; any other response is a 400."""
        job = await self.jobs.find(owner, response_id)
        if job is not None:
            return await self.jobs.cancel(job)
        with self._explained(owner, response_id):
            stored = await self.store.get(owner, response_id)  # 404 when unknown
        if not stored.get("background"):
            raise InvalidRequestError("Only background responses can be cancelled.", param=None)
        return stored  # a finished background response: cancelling again changes nothing


async def _stored_or_carried(job: Job | None, begun: Awaitable[StoredHistory]) -> tuple[StoredHistory | None, list[dict]]:
    """The store's history; where the store has none, the retained job record's to carry (else the 404)."""
    try:
        return await begun, []
    except NotFoundError:
        if job is None:
            raise
        return None, job.history_items()


def _check_continuable(job: Job) -> None:
    """A job can be continued once it finished with an answer: running is a 409, cancelled or failed a 400."""
    if job.active:
        raise ConflictError(
            f"Response '{job.id}' is still {job.state}; wait for it to finish before continuing it.",
            param="previous_response_id",
        )
    if job.state in ("cancelled", "failed"):
        raise InvalidRequestError(
            f"Response '{job.id}' {job.state} and cannot be continued; continue from an earlier response.",
            param="previous_response_id",
        )


def _position_after(items: list[tuple[str, bytes]], item_id: str) -> int:
    for i, (candidate, _) in enumerate(items):
        if candidate == item_id:
            return i + 1
    raise InvalidRequestError(f"No item with id '{echoed(item_id)}' in this response's input.", param="after")
