"""A response as a resource over HTTP: GET / DELETE `/v1/responses/{id}`, its `input_items`, and
`POST /v1/responses/{id}/cancel` for background ones.

Where a response is found (a retained background job, the store) and what each
operation does with it is `ResponseRecords`' decision (`records.py`); these
routes read and validate the query, call it with the caller's key
(`request.state.owner`, a hash), and answer in HTTP. Query options are
validated like body fields, before any lookup; one Maya does not honour is a
400 naming it, never silently ignored.
"""

from __future__ import annotations

from typing import Iterable

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from ...errors import InvalidRequestError
from ..jobs.over_http import stream_job
from .records import ResponseRecords

MAX_PAGE = 100
DEFAULT_PAGE = 20


def resources_router(records: ResponseRecords) -> APIRouter:
    router = APIRouter()

    @router.get("/v1/responses/{response_id}")
    async def retrieve(request: Request, response_id: str) -> Response:
        query = _query(request, ("include", "include[]", "stream", "starting_after", "include_obfuscation"))
        _refuse_include(query)
        if _one_of(query, "stream", ("false", "true"), "Use true or false.") == "true":
            job = await records.streamable(request.state.owner, response_id)
            return stream_job(records.jobs, job, query.get("starting_after"))
        if "starting_after" in query:
            raise InvalidRequestError("'starting_after' applies only with stream=true.", param="starting_after")
        return _json(await records.retrieve(request.state.owner, response_id))

    @router.delete("/v1/responses/{response_id}")
    async def delete(request: Request, response_id: str) -> Response:
        _query(request, ())
        await records.delete(request.state.owner, response_id)
        return _json({"id": response_id, "object": "response.deleted", "deleted": True})

    @router.post("/v1/responses/{response_id}/cancel")
    async def cancel(request: Request, response_id: str) -> Response:
        _query(request, ())
        return _json(await records.cancel(request.state.owner, response_id))

    @router.get("/v1/responses/{response_id}/input_items")
    async def input_items(request: Request, response_id: str) -> Response:
        query = _query(request, ("order", "limit", "after", "include", "include[]"))
        _refuse_include(query)
        order = _one_of(query, "order", ("desc", "asc"), "Use 'asc' or 'desc'.")
        limit = _limit(query.get("limit"))
        return _json(await records.input_items(request.state.owner, response_id,
                                         order=order, limit=limit, after=query.get("after")))

    return router


def _one_of(query: dict[str, str], name: str, choices: tuple[str, ...], hint: str) -> str:
    """The query parameter `name`, one of `choices` (the first is its default)."""
    value = query.get(name, choices[0])
    if value not in choices:
        raise InvalidRequestError(f"Invalid value for '{name}': {value!r}. {hint}", param=name)
    return value


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


def _json(body: dict) -> Response:
    return Response(orjson.dumps(body), media_type="application/json")
