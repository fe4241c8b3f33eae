"""Decoding only what the encoder sees: the bound an image is scaled to (Maya's side, the projector's
own size), JPEG's reduced-scale decode, strip-wise reduction in every mode, exact pixels for an image
within its bound, and the memory reserved before any pixel is decoded."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from tests.engine.mmproj_fixture import IMAGE_SIZE, write_test_mmproj
from maya_server.errors import BadImage
from maya_server.images.decode import decode_to_png, decoded_bytes, work_bytes
from maya_server.images.encoder import ImageBound, bound_for, read_projector

BIG = (7680, 4320)


def encoded(image: Image.Image, fmt: str = "PNG", **options) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **options)
    return out.getvalue()


def decode(raw: bytes, bound: ImageBound = ImageBound(1536), reserved: list | None = None) -> Image.Image:
    def reserve(decoded: int, work: int) -> None:
        if reserved is not None:
            reserved.append((decoded, work))

    png = decode_to_png(raw, max_pixels=33_177_600, bound=bound, reserve=reserve)
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.mode == "RGB"
    return image


@pytest.mark.parametrize("bound, size, target", [
    (ImageBound(1536), (7680, 4320), (1536, 864)),
    (ImageBound(1536), (4320, 7680), (864, 1536)),
    (ImageBound(1536), (1536, 1000), (1536, 1000)),
    (ImageBound(1536), (33_177_600, 1), (1536, 1)),
    (ImageBound(1536, cover_side=64), (7680, 4320), (113, 64)),
    (ImageBound(1536, cover_side=64), (64, 64), (64, 64)),
    (ImageBound(1536, cover_side=64), (40, 30), (40, 30)),
    (ImageBound(1536, cover_side=336), (30000, 100), (1536, 5)),
    (ImageBound(1536, max_pixels=1_000_000), (4000, 3000), (1154, 866)),
    (ImageBound(672, max_pixels=672 * 672), (4000, 1000), (672, 168)),
])
def test_the_target_keeps_what_the_encoder_uses(bound, size, target):
    assert bound.target(*size) == target


def test_the_projectors_metadata_tightens_the_bound(tmp_path):
    assert bound_for(1536, read_projector(str(write_test_mmproj(tmp_path / "p.gguf")))) == \
        ImageBound(1536, cover_side=IMAGE_SIZE)  # the test projector: LLaVA "mlp", 64 square
    assert bound_for(1536, {"clip.projector_type": "gemma3", "clip.vision.image_size": 896}).cover_side == 896
    pinpoints = [336, 672, 672, 336, 672, 672, 1008, 336, 336, 1008]
    assert bound_for(1536, {"clip.projector_type": "mlp", "clip.vision.image_size": 336,
                            "clip.vision.image_grid_pinpoints": pinpoints}) == ImageBound(1008, 672 * 672)
    assert bound_for(1536, {"clip.projector_type": "qwen2vl_merger", "clip.vision.image_size": 560,
                            "clip.vision.image_max_pixels": 1_003_520}) == ImageBound(1536, 1_003_520)
    # limits kept in llama.cpp's code, not in the file: Maya's own bound only
    assert bound_for(1536, {"clip.projector_type": "qwen2vl_merger", "clip.vision.image_size": 560}) == \
        ImageBound(1536)
    assert bound_for(1536, None) == ImageBound(1536)
    assert read_projector(str(tmp_path / "missing.gguf")) is None


def test_an_image_within_its_bound_reaches_the_engine_with_exactly_its_pixels():
    source = Image.effect_noise((300, 200), 60).convert("RGB")
    assert decode(encoded(source)).tobytes() == source.tobytes()
    assert decode(encoded(source, "BMP")).tobytes() == source.tobytes()


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "P", "L", "1", "I;16", "CMYK", "LA"])
def test_every_mode_is_reduced_in_strips_to_rgb(mode):
    source = Image.new("RGB", (3000, 2000), (200, 100, 50)).convert(mode, dither=Image.Dither.NONE)
    fmt = "JPEG" if mode == "CMYK" else "PNG"
    image = decode(encoded(source, fmt), ImageBound(512))
    assert image.size == (512, 341)
    expected = source.convert("RGB").getpixel((0, 0))
    assert all(abs(a - b) <= 3 for a, b in zip(image.getpixel((255, 170)), expected))


def test_a_large_jpeg_is_decoded_at_a_reduced_scale_and_reserved_as_such():
    raw = encoded(Image.new("RGB", BIG, (10, 200, 30)), "JPEG", quality=90)
    reserved: list = []
    image = decode(raw, ImageBound(1536), reserved)
    assert image.size == (1536, 864)
    (decoded, work), = reserved
    assert decoded == 1920 * 1080 * 4  # 1/4 scale: the smallest libjpeg scale still at least the target
    assert decoded < decoded_bytes("RGB", BIG) / 15


def test_a_png_reserves_its_full_decode_and_the_scaled_copies():
    raw = encoded(Image.new("RGB", BIG, (10, 200, 30)))
    reserved: list = []
    assert decode(raw, ImageBound(1536), reserved).size == (1536, 864)
    assert reserved == [(decoded_bytes("RGB", BIG), work_bytes("PNG", "RGB", BIG, (1536, 864)))]
    assert reserved[0][1] < decoded_bytes("RGB", BIG) * 1.3  # no second full-size copy is counted


def test_the_reservation_comes_before_any_pixel_and_may_refuse():
    raw = encoded(Image.new("RGB", BIG, (10, 200, 30)))

    def refuse(decoded: int, work: int) -> None:
        raise BadImage("no room", "memory")

    with pytest.raises(BadImage) as caught:
        decode_to_png(raw, max_pixels=33_177_600, bound=ImageBound(1536), reserve=refuse)
    assert caught.value.reason == "memory"


def test_too_many_pixels_and_bad_files_are_bad_images():
    with pytest.raises(BadImage) as caught:
        decode_to_png(encoded(Image.new("L", (2000, 2000))), max_pixels=1_000_000, bound=ImageBound(1536),
                      reserve=lambda d, w: pytest.fail("reserved for a refused image"))
    assert caught.value.reason == "pixels"
    for raw in (b"not an image", encoded(Image.new("RGB", (64, 64)))[:60],
                encoded(Image.new("RGB", (64, 64)), "TIFF")):
        with pytest.raises(BadImage) as caught:
            decode_to_png(raw, max_pixels=33_177_600, bound=ImageBound(1536), reserve=lambda d, w: None)
        assert caught.value.reason in ("decode", "format")


def test_a_progressive_jpeg_reserves_libjpegs_full_size_coefficients():
    image = Image.effect_noise((3000, 2000), 40).convert("RGB")
    plain, progressive = [], []
    decode(encoded(image, "JPEG"), ImageBound(512), plain)
    decode(encoded(image, "JPEG", progressive=True), ImageBound(512), progressive)
    assert progressive[0][1] - plain[0][1] == 3000 * 2000 * 6


def test_the_costliest_image_the_default_limits_allow_fits_the_default_pool():
    """An image that passes the other limits is never refused for memory alone: the worst one (a WebP at
    `image_max_pixels`, or a progressive JPEG), with its raw bytes, fits `image_server_bytes`."""
    from maya_server.config import ServerConfig as C

    side = int(C.image_max_pixels ** 0.5)
    size = (7680, C.image_max_pixels // 7680)
    target = ImageBound(C.image_max_side).target(*size)
    worst = max(work_bytes("WEBP", "RGBA", size, target),
                work_bytes("JPEG", "RGB", size, target) + size[0] * size[1] * 6,
                work_bytes("PNG", "RGBA", (side, side), ImageBound(C.image_max_side).target(side, side)))
    raw = C.image_max_bytes * 7 // 3  # a data URL: its ASCII copy and its decoded bytes
    assert worst + raw < C.image_server_bytes
    assert decoded_bytes("RGB", size) * C.image_max_count <= C.image_request_bytes
