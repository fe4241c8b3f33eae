"""A background task rebuilt on the replica that took it over (`responses/jobs/handover.py` says when).

The record keeps the request as it was validated, the history pinned at admission and the model and family it
was admitted for (the claim checks those two, so the engine here renders it as the first would have), and its
images as the first owner fetched and scaled them when they fit its `JOB_INPUT_BYTES` (else they are fetched
again here). Here the
request is validated again, converted against that history (never looking `previous_response_id` up again), its
response assembler stands where the log says the task stood (`ResponseAssembler.restore`), and its worker
continues: a queued task starts from the beginning; a task in progress continues its published output, written
after the prompt as the assistant's partial turn (`Family.continuation`) from the model's own text that the log
kept with the events (`PartialTurn.raw`, byte for byte, whatever the family), its events numbered after the log's.

What resumption can change: the text after the cut is sampled anew, so it differs from what the stopped replica
would have written, as any sampling does (with `temperature: 0` it is the same text, unless the engine is
nondeterministic). What it cannot: anything published stays as it is; the output limit counts the tokens written
before the cut. A `store: true` task is saved by whichever replica finishes it, with its pinned history.
"""

from __future__ import annotations

from typing import Callable

import orjson

from ...images.loader import with_image_data
from ...pipeline.generation import GenerationService
from ...structured.gate import gated, publish_gate
from ..assembly.assembler import ResponseAssembler
from ..conversion.convert import to_conversation, to_settings
from ..jobs.handover import ClaimedTask
from ..jobs.manager import Job
from ..request.request import parse_responses_request
from ..store.interface import ResponseStoreBackend
from ..store.redis_link import ScopedOwner
from ..persistence.stored_turn import StoredTurn
from ..persistence.unstored import UnstoredResponses
from .worker_generation import in_worker


class Resumer:
    """Rebuilds a task taken over for this replica's engine (`RedisJobManager.resumer`)."""

    def __init__(self, jobs, service: GenerationService, store: ResponseStoreBackend, unstored: UnstoredResponses,
                 model_name: str) -> None:
        self.jobs = jobs
        self.service = service
        self.store = store
        self.unstored = unstored
        self.model_name = model_name

    async def __call__(self, claimed: ClaimedTask, new_log: Callable) -> Job:
        """The task as a job of this replica (a `MayaError` when its request no longer validates here)."""
        body = parse_responses_request(orjson.loads(claimed.request))
        owner = ScopedOwner(claimed.owner_scope)
        turn = StoredTurn(self.store, owner, body, None, claimed.prior_items(), unstored=self.unstored)
        try:
            settings = to_settings(body)
            conversation = with_image_data(to_conversation(body, prior=turn.prior), claimed.images)
            self.service.check_images(conversation)
            assembler = ResponseAssembler(body, model=self.model_name, response_id=claimed.id,
                                          on_finish=turn.save if body.stored else None, on_unsaved=turn.not_saved)
            assembler.restore(orjson.loads(claimed.snapshot), [orjson.loads(event.json) for event in claimed.events],
                              [event.raw for event in claimed.events])
            partial = assembler.partial_turn() if claimed.state == "in_progress" else None
            gate = publish_gate(conversation, body.output_format)
            keep = lambda images: self.jobs.keep_images(claimed.id, images)  # noqa: E731
            generate = lambda: gated(in_worker(self.service, conversation, settings, None, owner,  # noqa: E731
                                               partial, keep), gate)
            job = Job(claimed.id, owner, assembler, new_log(claimed.id, assembler), generate, turn, claimed.history,
                      request=claimed.request, prior_count=claimed.prior_count)
            if partial is not None and partial.items and partial.raw is None:
                assembler.keeps_raw = False  # a log without the model's text (an older replica's) stays without it

        except BaseException:
            turn.release()
            raise
        turn.hand_over()
        return job
