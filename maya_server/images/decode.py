"""One image's bytes to the PNG the engine gets: checked, decoded small, scaled to its bound.

Why this shape: a 7680x4320 PNG of 107 KB decodes to 133 MB of pixels, and the
old path then wrote a full-resolution BMP (100 MB) that became 133 MB of base64,
all per image. Here nothing full-size is made beyond the decode itself:

1. the header is read first: format (PNG, JPEG, WebP, GIF's first frame, BMP)
   and width x height within `image_max_pixels`, so a decompression bomb is
   refused before its pixels exist;
2. the target size comes from the encoder's bound (`image_encoder.ImageBound`);
   a JPEG is decoded at 1/2, 1/4 or 1/8 scale straight away (libjpeg's DCT
   scaling, Pillow's `draft`) when the target is that much smaller;
3. the memory the decode will take (`work_bytes`) is reserved from the server's
   pool before it is decoded (`reserve`, which may refuse);
4. the decoded image is reduced by an integer factor in strips of rows (each
   strip converted to RGB and box-averaged), so no second full-size copy is
   made in another mode, then resized (Lanczos) to the exact target;
5. the result is PNG (lossless: an image within its bound reaches the model
   with exactly its pixels; compression level 1, which costs about what the
   decode does, where BMP would be as large as the raw pixels).

Runs in a worker thread; `cancelled` is polled between strips.
"""

from __future__ import annotations

import functools
import io
import math
import threading
from typing import Callable

from ..errors import BadImage, DecodeCancelled
from .encoder import ImageBound

FORMATS = {"PNG", "JPEG", "WEBP", "GIF", "BMP"}
STRIP_ROWS = 256
"""Rows converted and reduced at a time: a strip of a 7680-wide image is ~8 MB."""
PNG_LEVEL = 1
WEBP_COPIES = 4
PROGRESSIVE_BYTES_PER_PIXEL = 6
"""libjpeg keeps a progressive JPEG's DCT coefficients for the whole image at full size, whatever the
scale it decodes at: two bytes a coefficient, three components at most."""
_BYTES_PER_PIXEL = {"1": 1, "L": 1, "P": 1, "I;16": 2, "I;16B": 2, "I;16L": 2, "I;16N": 2}
"""What Pillow stores per pixel for a mode (every other mode takes 4 bytes)."""


def decode_to_png(raw: bytes | bytearray, *, max_pixels: int, bound: ImageBound,
                  reserve: Callable[[int, int], None], cancelled: threading.Event | None = None) -> bytes:
    """The image in `raw` as a PNG within `bound`. `reserve(decoded, work)` is called before the decode starts
    with the bytes of its pixels as decoded and the most memory the whole step takes (`work_bytes`); it may
    raise to refuse it. Raises `BadImage` for anything wrong with the image."""
    from PIL import Image

    try:
        image = Image.open(io.BytesIO(raw))
    except Image.DecompressionBombError:
        raise BadImage("The image has too many pixels (setting image_max_pixels).", "pixels") from None
    except Exception:  # Pillow raises many types on malformed input; each is the client's bad image
        raise BadImage("The image could not be decoded (truncated or not an image).", "decode") from None
    with image:
        _check_header(image, max_pixels)
        full_size, target = image.size, bound.target(*image.size)
        if image.format == "JPEG" and target != image.size:
            image.draft("RGB", target)
        work = work_bytes(image.format, image.mode, image.size, target)
        if image.format == "JPEG" and image.info.get("progressive"):
            work += full_size[0] * full_size[1] * PROGRESSIVE_BYTES_PER_PIXEL
        reserve(decoded_bytes(image.mode, image.size), work)
        try:
            image.load()
            return _png(_scaled_rgb(image, target, cancelled))
        except DecodeCancelled:
            raise
        except Exception:
            raise BadImage("The image could not be decoded (truncated or not an image).", "decode") from None
        finally:
            image.close()
            _return_freed_memory()


def decoded_bytes(mode: str, size: tuple[int, int]) -> int:
    """The bytes of an image's pixels as Pillow holds them once decoded."""
    return size[0] * size[1] * _BYTES_PER_PIXEL.get(mode, 4)


def work_bytes(fmt: str, mode: str, size: tuple[int, int], target: tuple[int, int]) -> int:
    """The most memory decoding and scaling an image takes: its pixels as decoded (WebP's, four times:
    libwebp's canvas, the frame Pillow copies out, the image, libwebp's own buffers; measured), the reduced
    copy, one strip in two modes and the target with its PNG."""
    width, height = size
    decoded = decoded_bytes(mode, size) * (WEBP_COPIES if fmt == "WEBP" else 1)
    factor = _factor(size, target)
    reduced = math.ceil(width / factor) * math.ceil(height / factor) * 4
    strip = width * _strip_rows(factor) * 4 * 2
    out = target[0] * target[1] * (4 + 3)
    return decoded + reduced + strip + out


def _check_header(image, max_pixels: int) -> None:
    if image.format not in FORMATS:
        raise BadImage(f"Unsupported image format {image.format}; use PNG, JPEG, WebP, GIF or BMP.", "format")
    width, height = image.size
    if width * height > max_pixels:
        raise BadImage(f"The image is {width}x{height} pixels; at most {max_pixels} pixels are accepted "
                       "(setting image_max_pixels).", "pixels")


def _factor(size: tuple[int, int], target: tuple[int, int]) -> int:
    return max(1, min(size[0] // target[0], size[1] // target[1]))


def _strip_rows(factor: int) -> int:
    return factor * max(1, STRIP_ROWS // factor)


def _scaled_rgb(image, target: tuple[int, int], cancelled: threading.Event | None):
    from PIL import Image

    if image.size == target:
        return image if image.mode == "RGB" else image.convert("RGB")
    width, height = image.size
    factor = _factor(image.size, target)
    rows = _strip_rows(factor)
    reduced = Image.new("RGB", (math.ceil(width / factor), math.ceil(height / factor)))
    for top in range(0, height, rows):
        if cancelled is not None and cancelled.is_set():
            raise DecodeCancelled()
        strip = image.crop((0, top, width, min(height, top + rows))).convert("RGB")
        reduced.paste(strip.reduce(factor) if factor > 1 else strip, (0, top // factor))
        del strip
    return reduced if reduced.size == target else reduced.resize(target, Image.Resampling.LANCZOS)


def _return_freed_memory() -> None:
    """Give the freed pixels back to the operating system. glibc's malloc raises its mmap threshold after
    a large block is freed, so later image-sized blocks come from arenas it keeps: without a trim, RSS stays
    at its peak after the requests end. Elsewhere (no glibc) there is nothing to do."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    """glibc's `malloc_trim`, looked up once; None where there is none."""
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def _png(image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=PNG_LEVEL)
    return out.getvalue()
