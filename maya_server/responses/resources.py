"""The stored response as a resource: GET / DELETE `/v1/responses/{id}` and its `input_items`.

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

from ..errors import InvalidRequestError
from .store import ResponseStore

MAX_PAGE = 100
DEFAULT_PAGE = 20


def resources_router(store: ResponseStore) -> APIRouter:
    router = APIRouter()

    @router.get("/v1/responses/{response_id}")
    async def retrieve(request: Request, response_id: str) -> Response:
        query = _query(request, ("include", "include[]", "stream", "starting_after", "include_obfuscation"))
        _refuse_include(query)
        if query.get("stream", "false") != "false":
            raise InvalidRequestError(
                "Only background responses can be streamed; this one was stored when it finished. "
                "Retrieve it without 'stream'.", param="stream",
            )
        if "starting_after" in query:
            raise InvalidRequestError("'starting_after' applies only with stream=true.", param="starting_after")
        return _json(store.get(request.state.owner, response_id))

    @router.delete("/v1/responses/{response_id}")
    async def delete(request: Request, response_id: str) -> Response:
        _query(request, ())
        store.delete(request.state.owner, response_id)
        return _json({"id": response_id, "object": "response.deleted", "deleted": True})

    @router.get("/v1/responses/{response_id}/input_items")
    async def input_items(request: Request, response_id: str) -> Response:
        query = _query(request, ("order", "limit", "after", "include", "include[]"))
        _refuse_include(query)
        order = query.get("order", "desc")
        if order not in ("asc", "desc"):
            raise InvalidRequestError(f"Invalid value for 'order': {order!r}. Use 'asc' or 'desc'.", param="order")
        limit = _limit(query.get("limit"))
        blocks = store.input_blocks(request.state.owner, response_id)
        if order == "desc":
            blocks = blocks[::-1]
        start = 0
        if "after" in query:
            start = _position_after(blocks, query["after"])
        page = blocks[start : start + limit]
        with store.assembling(sum(block.size for block in page)):
            data = [orjson.loads(block.data) for block in page]
        return _json({
            "object": "list", "data": data,
            "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None,
            "has_more": start + limit < len(blocks),
        })

    return router


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


def _position_after(blocks: list, item_id: str) -> int:
    for i, block in enumerate(blocks):
        if block.item_id == item_id:
            return i + 1
    raise InvalidRequestError(f"No item with id '{item_id}' in this response's input.", param="after")


def _json(body: dict) -> Response:
    return Response(orjson.dumps(body), media_type="application/json")
