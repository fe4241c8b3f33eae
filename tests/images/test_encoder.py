"""The image bound the vision encoder implies: an image within bounds is never scaled, a larger one is scaled
down keeping its aspect ratio (by side, by pixels, or to cover a fixed-size encoder's square), and a
projector's metadata tightens Maya's `max_side` only in the ways its encoder actually uses."""

from __future__ import annotations

import pytest

from maya_server.images.encoder import ImageBound, bound_for, read_projector


def test_an_image_within_bounds_keeps_its_exact_size():
    assert ImageBound(1536).target(1536, 800) == (1536, 800)
    assert ImageBound(1536, max_pixels=100 * 100).target(100, 100) == (100, 100)
    assert ImageBound(1536, cover_side=336).target(336, 1000) == (336, 1000)


def test_a_smaller_image_is_never_scaled_up():
    assert ImageBound(1536).target(1280, 720) == (1280, 720)
    assert ImageBound(1536, max_pixels=10 ** 6, cover_side=896).target(640, 480) == (640, 480)


def test_max_side_scales_the_longer_side_down_keeping_the_aspect_ratio():
    assert ImageBound(1000).target(4000, 2000) == (1000, 500)
    assert ImageBound(1000).target(2000, 4000) == (500, 1000)


def test_max_pixels_scales_to_at_most_that_many_pixels():
    width, height = ImageBound(10_000, max_pixels=1_000_000).target(4000, 1000)
    assert width * height <= 1_000_000 and (width, height) == (2000, 500)


def test_cover_side_keeps_the_shorter_side_at_the_encoders_input():
    assert ImageBound(1536, cover_side=448).target(1792, 896) == (896, 448)


def test_a_very_thin_image_keeps_at_least_one_pixel_per_side():
    assert ImageBound(100).target(100_000, 10) == (100, 1)


def test_no_projector_leaves_max_side_alone():
    assert bound_for(1536, None) == ImageBound(1536)
    assert bound_for(1536, {}) == ImageBound(1536)


def test_grid_pinpoints_give_the_largest_tilings_side_and_pixels():
    projector = {"clip.vision.image_grid_pinpoints": [336, 672, 672, 336, 672, 672, 1008, 336]}
    assert bound_for(1536, projector) == ImageBound(1008, 672 * 672)
    assert bound_for(800, projector) == ImageBound(800, 672 * 672)


def test_dynamic_resolution_encoders_bound_the_pixels():
    assert bound_for(1536, {"clip.vision.image_max_pixels": 1_003_520}) == ImageBound(1536, 1_003_520)


@pytest.mark.parametrize("key", ["clip.vision.projector_type", "clip.projector_type"])
def test_a_fixed_size_projector_covers_its_image_size(key):
    assert bound_for(1536, {key: "gemma3", "clip.vision.image_size": 896}) == ImageBound(1536, cover_side=896)


@pytest.mark.parametrize("projector", [
    {"clip.projector_type": "qwen2vl_merger", "clip.vision.image_size": 560},  # limits kept in llama.cpp's code
    {"clip.projector_type": "mlp", "clip.vision.image_size": 0},
    {"clip.projector_type": "mlp", "clip.vision.image_size": True},
    {"clip.vision.image_max_pixels": -5, "clip.vision.image_grid_pinpoints": [336]},
    {"clip.vision.image_grid_pinpoints": "336,672"},
])
def test_metadata_the_encoder_does_not_use_or_that_is_invalid_leaves_max_side_alone(projector):
    assert bound_for(1536, projector) == ImageBound(1536)


def test_read_projector_gives_none_without_a_path_or_for_a_file_that_is_not_gguf(tmp_path):
    assert read_projector(None) is None
    not_gguf = tmp_path / "mmproj.gguf"
    not_gguf.write_bytes(b"this is not a gguf file")
    assert read_projector(str(not_gguf)) is None
    assert read_projector(str(tmp_path / "absent.gguf")) is None
