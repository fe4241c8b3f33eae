"""The store's part in one `POST /v1/responses`: the history it continues and the save.

Opened before generation, so every refusal comes first: an unknown, expired,
evicted, deleted or other-key `previous_response_id` is a 404, a running
background response a 409, a cancelled or failed one a 400, a busy assembly
budget a 503, a duplicate item id a 400, and a `store:true` turn whose
snapshot could never fit a 413. The continued history stays pinned until
`release()`, so deleting an ancestor mid-generation loses nothing.

Exactly one holder releases a turn, once. The request handler opens it in a
`with` block, and leaving the block releases it: a refusal before
generation, a JSON answer drained or abandoned (499). When something must
outlive the handler, the handler passes the turn to it with `hand_over()`
as the last step before returning it, and from then on only that holder
releases: the SSE response (its `on_close`, however the stream ends: done,
client gone, shutdown) or the admitted background job (`JobManager._finish`,
however the job ends: done, cancelled, timed out, failed). A failure while
opening releases what was pinned before it propagates. `release()` is
idempotent, and a turn can be handed over only once.

Which history a turn continues is decided by `ResponseRecords.open_turn`
(`responses/endpoints/records.py`), the one owner of "job record first, then the store": it hands
this turn either the store's copy, already pinned, or, when the store has
evicted a background response whose job record is still retained, that
record's items, which are then stored again with this turn. `save` is the
assembler's `on_finish` (a coroutine: a shared store is a round trip away): it runs before the terminal
event. `not_saved` is called instead when a `store:true` response ends without being saved (the
assembler's `on_unsaved`, or the stream's close when its client left), so that asking for it later says why
it is missing (`UnstoredResponses`).
"""

from __future__ import annotations

from typing import Sequence

import orjson

from ..request.request import ResponsesRequest
from ..request.items import InputItem
from ..store.interface import ResponseStoreBackend, StoredHistory
from .stored_items import replay, stored_input_items
from .unstored import UnstoredResponses


class StoredTurn:
    """The continued history, this turn's stored items and the save; see the module docstring for
    who releases it."""

    def __init__(
        self,
        store: ResponseStoreBackend,
        owner: str,
        request: ResponsesRequest,
        base: StoredHistory | None = None,
        carried: Sequence[dict] = (),
        *,
        unstored: UnstoredResponses | None = None,
    ) -> None:
        """`base`: the continued stored response, pinned by the caller and released by this turn from now
        on (even when this constructor refuses); `carried`: a job record's history when the store has none."""
        self.store = store
        self.owner = owner
        self.request = request
        self.base = base
        self.history: list[dict] = []
        """The continued history's items (request-owned, released with the turn)."""
        self.carried: list[dict] = list(carried)
        """History taken from a job record, stored again with this turn."""
        self.new_items: list[dict] = []
        self.prior: tuple[InputItem, ...] = ()
        self.handed_over = False
        self.unstored = unstored
        try:
            self._prepare()
        except BaseException:
            self.release()
            raise

    def _prepare(self) -> None:
        self.history = self.base.items() if self.base is not None else self.carried
        self.prior = replay(self.history)
        if self.request.stored or self.history:
            taken = (item["id"] for item in self.history)
            self.new_items = self.carried + stored_input_items(self.request.input or (), taken)
        if self.request.stored:
            history = self.base.history_bytes if self.base is not None else 0
            self.store.check_fits(history + sum(len(orjson.dumps(item)) for item in self.new_items))

    def input_history(self) -> list[dict]:
        """The full input history of this turn: the continued history, then this request's items."""
        own = self.new_items[len(self.carried):]
        return self.history + own

    async def save(self, snapshot: dict) -> None:
        """Store the finished response (called only when the request asked for `store:true`)."""
        await self.store.put(self.owner, snapshot, self.new_items, self.base)

    def not_saved(self, response_id: str, ending: str) -> None:
        """A response that asked to be stored ended `ending` (`failed`, `cancelled`, `abandoned`) unsaved."""
        if self.request.stored and self.unstored is not None:
            self.unstored.note(self.owner, response_id, ending)

    def __enter__(self) -> StoredTurn:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if not self.handed_over:
            self.release()

    def hand_over(self) -> None:
        """Make the holder that outlives the `with` block (the stream, the job) the one that releases."""
        if self.handed_over:
            raise RuntimeError("a stored turn has one holder: it was already handed over")
        self.handed_over = True

    def release(self) -> None:
        """Unpin the continued history (idempotent). Only the turn's one holder calls it."""
        if self.base is not None:
            self.base.release()
        self.history = []
