"""The image loader's limits and their defaults, defined once here: the documented default values, the
bound defaulting to `MAX_SIDE`, immutability, and `fetch_limits` handing the fetcher exactly its fields."""

from __future__ import annotations

import dataclasses

import pytest

from maya_server.images.encoder import ImageBound
from maya_server.images.fetch import FetchLimits
from maya_server.images.limits import MAX_SIDE, ImageLimits


def test_the_defaults_are_the_documented_ones():
    limits = ImageLimits()
    assert MAX_SIDE == 1536 and limits.bound == ImageBound(MAX_SIDE)
    assert limits.max_bytes == 20 * 1024 * 1024
    assert limits.max_pixels == 7680 * 4320  # 8K UHD
    assert limits.max_count == 8 and limits.max_redirects == 3 and limits.allow_private is False
    assert (limits.fetch_timeout, limits.fetch_deadline) == (10.0, 30.0)
    assert limits.request_bytes == 1024 ** 3 and limits.server_bytes == 768 * 1024 ** 2


def test_the_server_pool_holds_the_costliest_single_image_the_other_limits_allow():
    limits = ImageLimits()
    assert limits.server_bytes >= 560 * 1000 ** 2  # a 33 MP WebP takes ~560 MB to decode
    assert limits.request_bytes >= limits.server_bytes


def test_limits_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ImageLimits().max_count = 99  # type: ignore[misc]


def test_fetch_limits_carry_the_fetch_fields_in_order():
    limits = ImageLimits(max_bytes=1000, fetch_timeout=1.5, fetch_deadline=4.0, max_redirects=0, allow_private=True)
    assert limits.fetch_limits() == FetchLimits(max_bytes=1000, timeout=1.5, deadline=4.0, max_redirects=0,
                                                allow_private=True)


def test_fetch_limits_of_the_defaults():
    assert ImageLimits().fetch_limits() == FetchLimits(20 * 1024 * 1024, 10.0, 30.0, 3, False)
