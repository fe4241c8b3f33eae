"""Why a `store: true` response is not in the store: the ids of recent ones that ended without being saved.

The contract stores a response only when it completes or ends incomplete: a failed one, a cancelled one
and a stream whose client left are not stored. Without a word of why, asking for such an id afterwards
(or continuing it) is the store's general 404, which tells the client to set `store: true`, as it did.
So `ResponseRecords` remembers, per owner, the ids that asked to be stored and were not, and how each
ended, and words the 404 for them from here.

A small bounded memory rather than a stored tombstone: it costs no store room and no store setting, and
it explains the common case (a client reading back or continuing the response it just saw fail). It
holds `UNSTORED_IDS` ids (about 150 bytes each), oldest forgotten first; an id it no longer holds gets
the general answer, which is still true. Lookups are scoped to the owner, so another key's probe of the
id is the same 404 as an unknown id's. Only aggregates leave it (`stats`), never an id or an owner.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ...util.echoed import echoed

UNSTORED_IDS = 4096
"""The most ids remembered at once, over all owners (a constant: the memory is small and only improves
an error message)."""
ENDINGS = {
    "failed": "it failed",
    "cancelled": "it was cancelled",
    "abandoned": "its client disconnected before it finished",
}
"""How a response ended without being stored -> the words the 404 uses."""


class UnstoredResponses:
    def __init__(self, limit: int = UNSTORED_IDS) -> None:
        self.limit = limit
        self._ended: OrderedDict[str, tuple[str, str]] = OrderedDict()  # id -> (owner, ending), oldest first
        self._lock = threading.Lock()
        self.noted = 0
        self.evicted = 0

    def note(self, owner: str, response_id: str, ending: str) -> None:
        """Remember that `response_id` asked to be stored and ended `ending` (a key of `ENDINGS`) instead."""
        if ending not in ENDINGS:
            raise ValueError(f"unknown ending {ending!r}")
        with self._lock:
            self._ended[response_id] = (owner, ending)
            self._ended.move_to_end(response_id)
            self.noted += 1
            while len(self._ended) > self.limit:
                self._ended.popitem(last=False)
                self.evicted += 1

    def forget(self, owner: str, response_id: str) -> None:
        with self._lock:
            if self._ended.get(response_id, ("", ""))[0] == owner:
                del self._ended[response_id]

    def explain(self, owner: str, response_id: str) -> str | None:
        """The 404's message for an id this owner asked to store and that ended unsaved; None if not known."""
        with self._lock:
            found = self._ended.get(response_id)
        if found is None or found[0] != owner:
            return None
        return (f"Response with id '{echoed(response_id)}' not found: it was not stored because {ENDINGS[found[1]]}. "
                "With \"store\": true a response is saved only when it completes or ends incomplete. "
                "Continue from an earlier response, or send the whole history in 'input'.")

    def stats(self) -> dict:
        with self._lock:
            return {"entries": len(self._ended), "limit": self.limit, "noted": self.noted, "evicted": self.evicted}
