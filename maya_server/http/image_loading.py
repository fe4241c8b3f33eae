"""A request's images, loaded before its response starts: admitted like the rest of the request, and
stopped when its client leaves or the server stops.

Why here: fetching and decoding images is the heaviest work a request does before it reaches the
engine, so it must count against the engine queue (`--max-queue`: a full queue is a 429 before any
image is fetched, not after) and end with the request (a client that leaves cancels its fetches at
once, as a background task's cancel does; a SIGTERM cancels them, so shutdown does not wait on them).
"""

from __future__ import annotations

from starlette.requests import Request

from ..neutral.conversation import Conversation, image_parts
from ..engine.fifo import Admission
from ..errors import ShuttingDown
from ..pipeline.generation import GenerationService
from .disconnect import while_client_waits
from .shutdown import shutdown_error


async def load_admitted(request: Request, service: GenerationService,
                        conversation: Conversation) -> tuple[Conversation, Admission | None]:
    """The conversation with its images loaded, and the engine admission taken before they were (None for a
    conversation without images: the caller admits as before). Refusals are raised: the images' 400s, a full
    queue's or image memory's 429, the shutdown 503, `ClientGone` (a 499); the admission is released then."""
    service.check_images(conversation)
    if not image_parts(conversation):
        return conversation, None
    admission = service.admit()
    try:
        return await while_client_waits(request, service.load_images(conversation)), admission
    except ShuttingDown:
        admission.release()
        raise shutdown_error() from None
    except BaseException:
        admission.release()
        raise
