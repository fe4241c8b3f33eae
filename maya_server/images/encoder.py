"""How large an image the engine's vision encoder looks at, so Maya never keeps more pixels than that.

Why: llama.cpp's projector resizes every image to its encoder's input before it
embeds it, so pixels beyond that input are work and memory for nothing, and a
full-resolution image sent on (base64 in a JSON body) can pass llama-server's
request-size limit. The projector GGUF (`--mmproj`) says what its encoder takes,
and Maya reads it from the file's header (what llama.cpp's `clip.cpp` reads):

- a fixed-size encoder (the LLaVA-style projectors `mlp`, `mlp_norm`, `ldp`,
  `ldpv2`, `cogvlm`, `janus_pro`, `glm_edge` without grid pinpoints, and
  `gemma3`, `gemma3nv`): every image becomes `clip.vision.image_size` square, so
  an image keeps its shorter side at least that long (it may be stretched or
  padded to the square; either way nothing it uses is lost);
- `clip.vision.image_grid_pinpoints` (LLaVA-NeXT "anyres"): the largest tiling's
  pixels and side;
- `clip.vision.image_max_pixels` (dynamic-resolution encoders): that many pixels.

Other projectors keep their limits in llama.cpp's code rather than in the file;
for them, and for a remote llama-server whose projector Maya cannot read, the
operator's `image_max_side` is the bound. An image at or below the encoder's
size is never scaled, so the model sees exactly its pixels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FIXED_SIZE_PROJECTORS = frozenset({"mlp", "mlp_norm", "ldp", "ldpv2", "cogvlm", "janus_pro", "glm_edge",
                                   "gemma3", "gemma3nv"})
"""`clip.projector_type` values whose image preprocessing resizes to `image_size` x `image_size`."""


@dataclass(frozen=True)
class ImageBound:
    """The most an image keeps: inside `max_side` x `max_side`, at most `max_pixels`, and no shorter side
    longer than `cover_side` (a fixed-size encoder's input)."""

    max_side: int
    max_pixels: int | None = None
    cover_side: int | None = None

    def target(self, width: int, height: int) -> tuple[int, int]:
        """The size an image of `width` x `height` is scaled down to (itself when it is within bounds)."""
        scale = self.max_side / max(width, height)
        if self.max_pixels is not None:
            scale = min(scale, math.sqrt(self.max_pixels / (width * height)))
        if self.cover_side is not None:
            scale = min(scale, self.cover_side / min(width, height))
        if scale >= 1:
            return width, height
        return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))


def bound_for(max_side: int, projector: dict[str, object] | None) -> ImageBound:
    """Maya's `max_side`, tightened by what the projector's metadata says its encoder takes."""
    if not projector:
        return ImageBound(max_side)
    kind = projector.get("clip.vision.projector_type") or projector.get("clip.projector_type")
    pinpoints = _ints(projector.get("clip.vision.image_grid_pinpoints"))
    max_pixels = _positive(projector.get("clip.vision.image_max_pixels"))
    image_size = _positive(projector.get("clip.vision.image_size"))
    if len(pinpoints) >= 2:
        pairs = list(zip(pinpoints[::2], pinpoints[1::2]))
        return ImageBound(min(max_side, max(max(pair) for pair in pairs)), max(w * h for w, h in pairs))
    if max_pixels is not None:
        return ImageBound(max_side, max_pixels)
    if kind in FIXED_SIZE_PROJECTORS and image_size is not None:
        return ImageBound(max_side, cover_side=image_size)
    return ImageBound(max_side)


def read_projector(path: str | None) -> dict[str, object] | None:
    """The projector GGUF's metadata, or None (no projector; a file that is not GGUF is llama-server's
    to refuse at start-up)."""
    if path is None:
        return None
    from ..model.gguf_metadata import read_gguf_metadata

    try:
        return read_gguf_metadata(path)
    except (OSError, ValueError):
        return None


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _ints(value: object) -> list[int]:
    return [v for v in value if _positive(v)] if isinstance(value, list) else []
