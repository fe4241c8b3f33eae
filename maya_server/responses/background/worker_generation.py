"""A background task's generation as its worker runs it, whether the task starts here or is continued here after
another replica stopped (`resumable.py`).

Unprepared (it has images, or it was taken over), the worker first fetches and decodes the images and prepares,
as the spec gives workers preparation and image work: a cancel or the deadline waits for that step to return and
clean up, and its refusals fail the task with their error.
"""

from __future__ import annotations

from typing import AsyncIterator, Awaitable, Callable

from ...errors import MayaError
from ...neutral.conversation import Conversation, PartialTurn, image_parts
from ...neutral.events import Failed, PipelineEvent, Usage
from ...pipeline.generation import GenerationService, GenerationSettings, PreparedGeneration


async def in_worker(service: GenerationService, conversation: Conversation, settings: GenerationSettings,
                    prepared: PreparedGeneration | None, owner: str, partial: PartialTurn | None = None,
                    keep_images: Callable[[list[bytes]], Awaitable[None]] | None = None,
                    ) -> AsyncIterator[PipelineEvent]:
    """The task's pipeline events, with the model's own text (`RawOutput`) for a log that lets another replica take
    the task over; `partial`: the assistant's turn published before it was taken over, which the model continues; `keep_images`: where the images go once loaded, for a replica that may take the task
    over (a store that cannot take them only means that replica fetches them again)."""
    if prepared is None:
        try:
            conversation = await service.load_images(conversation)
            if keep_images is not None and image_parts(conversation):
                try:
                    await keep_images([part.data for part in image_parts(conversation)])
                except MayaError:
                    pass
            prepared = await service.prepare_async(conversation, settings, context_param="input", owner=owner,
                                                   partial=partial)
        except MayaError as exc:
            yield Failed(exc, Usage(0, 0, 0, 0))
            return
    async for event in service.run(prepared, service.admit(bounded=False), raw_output=True):
        yield event
