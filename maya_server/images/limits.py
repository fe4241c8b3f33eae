"""How much of every kind an image load may take: the image loader's limits, and their defaults.

Why its own module: the defaults are defined here once, and the settings
(`ServerConfig`'s `image_*`) take theirs from here, while the composition root
(`app.py`) builds the limits from the settings. So the image layer never sees
the configuration, and no default is written twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from .encoder import ImageBound
from .fetch import FetchLimits

MAX_SIDE = 1536
"""The longest side an image keeps by default (before the projector's own input size tightens it)."""


@dataclass(frozen=True)
class ImageLimits:
    """Each field is the setting of the same name with `image_` before it (`max_bytes`: `image_max_bytes`);
    `bound` is the one that is worked out (`image_max_side`, tightened by the projector's encoder)."""

    max_bytes: int = 20 * 1024 * 1024
    """The largest image (fetched body or decoded data URL); enforced while a fetch streams."""
    max_pixels: int = 33_177_600
    """Width x height above this is refused before decoding (decompression bombs); 8K UHD."""
    max_count: int = 8
    """Images one request may carry."""
    fetch_timeout: float = 10.0
    """Seconds to connect to, and between reads from, an image URL's server."""
    max_redirects: int = 3
    allow_private: bool = False
    """Allow image URLs that resolve to loopback, private, link-local or metadata addresses (off: refused)."""
    fetch_deadline: float = 30.0
    """Seconds one image's whole fetch may take (redirects and body included), however steadily it reads."""
    request_bytes: int = 1024 * 1024 * 1024
    """Decoded bytes one request's images may add up to (width x height x bytes per pixel, as decoded)."""
    server_bytes: int = 768 * 1024 * 1024
    """Image bytes the whole server holds at once while images load (fetched bodies, decoded pixels); the
    default holds the costliest single image the other limits allow (a 33 MP WebP, ~560 MB to decode)."""
    bound: ImageBound = ImageBound(MAX_SIDE)
    """The size an image is scaled down to: `image_max_side`, tightened by the projector's encoder."""

    def fetch_limits(self) -> FetchLimits:
        return FetchLimits(self.max_bytes, self.fetch_timeout, self.fetch_deadline, self.max_redirects,
                           self.allow_private)
