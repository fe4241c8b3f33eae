"""The store's part in one `POST /v1/responses`: the history it continues and the save.

Opened before generation, so every refusal comes first: an unknown, expired,
evicted, deleted or other-key `previous_response_id` is a 404, a busy
assembly budget a 503, a duplicate item id a 400, and a `store:true` turn
whose snapshot could never fit a 413. The continued history stays pinned
until `release()`, so deleting an ancestor mid-generation loses nothing.
`save` is the assembler's `on_finish`: it runs before the terminal event.
"""

from __future__ import annotations

import orjson

from .request import ResponsesRequest
from .request_items import InputItem
from .store import Continuation, ResponseStore
from .stored_items import replay, stored_input_items


class StoredTurn:
    def __init__(self, store: ResponseStore, owner: str, request: ResponsesRequest) -> None:
        self.store = store
        self.owner = owner
        self.request = request
        self.base: Continuation | None = None
        self.prior: tuple[InputItem, ...] = ()
        self.new_items: list[dict] = []
        if request.previous_response_id is not None:
            self.base = store.begin(owner, request.previous_response_id)
        try:
            self._prepare()
        except BaseException:
            self.release()
            raise

    def _prepare(self) -> None:
        base = self.base
        if base is not None:
            self.prior = replay(base.items())
        if self.request.stored or base is not None:
            taken = base.item_ids() if base is not None else ()
            self.new_items = stored_input_items(self.request.input or (), taken)
        if self.request.stored:
            history = base.history_bytes if base is not None else 0
            self.store.check_fits(self.owner, history + sum(len(orjson.dumps(item)) for item in self.new_items))

    def save(self, snapshot: dict) -> None:
        """Store the finished response (called only when the request asked for `store:true`)."""
        self.store.put(self.owner, snapshot, self.new_items, self.base)

    def release(self) -> None:
        if self.base is not None:
            self.base.release()
