"""A response as a resource: GET / DELETE `/v1/responses/{id}`, its `input_items`, and
`POST /v1/responses/{id}/cancel` for background ones.

A retained background job answers first (its live snapshot and events), then
the response store.

Every lookup is scoped to the caller's key (`request.state.owner`, a hash):
another key's, expired, evicted, deleted and unknown ids are all the same
404. Query options are validated like body fields; one Maya does not honour
is a 400 naming it, never silently ignored.
"""

from __future__ import annotations

from typing import Iterable

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from ..errors import InvalidRequestError, NotFoundError
from .background import not_streamable, stream_job
from .jobs import JobManager
from .store import ResponseStore

MAX_PAGE = 100
DEFAULT_PAGE = 20


def resources_router(store: ResponseStore, jobs: JobManager) -> APIRouter:
    router = APIRouter()

    @router.get("/v1/responses/{response_id}")
    async def retrieve(request: Request, response_id: str) -> Response:
        query = _query(request, ("include", "include[]", "stream", "starting_after", "include_obfuscation"))
        _refuse_include(query)
        owner = request.state.owner
        job = jobs.find(owner, response_id)
        stream = query.get("stream", "false")
        if stream not in ("true", "false"):
            raise InvalidRequestError(f"Invalid value for 'stream': {stream!r}. Use true or false.", param="stream")
        if stream == "true":
            if job is None:
                store.get(owner, response_id)  # 404 when unknown
                raise not_streamable(response_id)
            return stream_job(jobs, job, query.get("starting_after"))
        if "starting_after" in query:
            raise InvalidRequestError("'starting_after' applies only with stream=true.", param="starting_after")
        return _json(job.snapshot() if job is not None else store.get(owner, response_id))

    @router.delete("/v1/responses/{response_id}")
    async def delete(request: Request, response_id: str) -> Response:
        _query(request, ())
        owner = request.state.owner
        had_record = jobs.delete(owner, response_id)  # 409 while the job is active
        try:
            store.delete(owner, response_id)
        except NotFoundError:
            if not had_record:
                raise
        return _json({"id": response_id, "object": "response.deleted", "deleted": True})

    @router.post("/v1/responses/{response_id}/cancel")
    async def cancel(request: Request, response_id: str) -> Response:
        _query(request, ())
        owner = request.state.owner
        job = jobs.find(owner, response_id)
        if job is not None:
            return _json(await jobs.cancel(job))
        stored = store.get(owner, response_id)  # 404 when unknown
        if not stored.get("background"):
            raise InvalidRequestError("Only background responses can be cancelled.", param=None)
        return _json(stored)  # a finished background response: cancelling again changes nothing

    @router.get("/v1/responses/{response_id}/input_items")
    async def input_items(request: Request, response_id: str) -> Response:
        query = _query(request, ("order", "limit", "after", "include", "include[]"))
        _refuse_include(query)
        order = query.get("order", "desc")
        if order not in ("asc", "desc"):
            raise InvalidRequestError(f"Invalid value for 'order': {order!r}. Use 'asc' or 'desc'.", param="order")
        limit = _limit(query.get("limit"))
        items = _input_items(store, jobs, request.state.owner, response_id)
        if order == "desc":
            items = items[::-1]
        start = _position_after(items, query["after"]) if "after" in query else 0
        page = items[start : start + limit]
        with store.assembling(sum(len(data) for _, data in page)):
            data = [orjson.loads(raw) for _, raw in page]
        return _json({
            "object": "list", "data": data,
            "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None,
            "has_more": start + limit < len(items),
        })

    return router


def _input_items(store: ResponseStore, jobs: JobManager, owner: str, response_id: str) -> list[tuple[str, bytes]]:
    """(id, JSON) of each input item, oldest first: from the store, else from a retained job record."""
    try:
        return [(block.item_id, block.data) for block in store.input_blocks(owner, response_id)]
    except NotFoundError:
        job = jobs.find(owner, response_id)
        if job is None:
            raise
        return [(item["id"], orjson.dumps(item)) for item in orjson.loads(job.history)]


def _query(request: Request, allowed: Iterable[str]) -> dict[str, str]:
    """The query as a dict (the last value of a repeated key wins, `include` excepted: any is refused)."""
    allowed = set(allowed)
    for name in request.query_params:
        if name not in allowed:
            raise InvalidRequestError(f"Unrecognized query parameter: '{name}'.", param=name)
    return dict(request.query_params)


def _refuse_include(query: dict[str, str]) -> None:
    for name in ("include", "include[]"):
        if name in query:
            raise InvalidRequestError(
                f"Invalid value for 'include': {query[name]!r}. Stored responses have no additional "
                "fields to include.", param="include",
            )


def _limit(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_PAGE
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidRequestError(f"Invalid value for 'limit': {raw!r}. It must be 1..{MAX_PAGE}.", param="limit")
    return limit


def _position_after(items: list[tuple[str, bytes]], item_id: str) -> int:
    for i, (candidate, _) in enumerate(items):
        if candidate == item_id:
            return i + 1
    raise InvalidRequestError(f"No item with id '{item_id}' in this response's input.", param="after")


def _json(body: dict) -> Response:
    return Response(orjson.dumps(body), media_type="application/json")
