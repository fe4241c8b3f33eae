"""The image memory pool and the per-request decoded budget: a full pool is a 429 that changes nothing,
a request past its budget (or an image past the whole pool) a 400, and every byte comes back."""

from __future__ import annotations

import asyncio
import base64
import io
import threading

import pytest
from PIL import Image

from maya_server.neutral.conversation import Conversation, ImagePart, Message
from maya_server.errors import ImageError, RateLimitError
from maya_server.images.decode import decoded_bytes
from maya_server.images.memory import ImageMemory
from maya_server.images.loader import ImageLimits, ImageLoader
from maya_server.metrics import Metrics

from tests.server import prometheus_values


def data_url(size=(2000, 1000)) -> str:
    out = io.BytesIO()
    Image.new("RGB", size, (9, 9, 9)).save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def conversation(*urls: str) -> Conversation:
    return Conversation((Message("user", tuple(ImagePart(u, param=f"p[{i}]") for i, u in enumerate(urls))),))


def test_the_pool_gives_what_it_has_and_takes_everything_back():
    pool = ImageMemory(100)
    with pool.holding() as first, pool.holding() as second:
        first.take(60, "a")
        with pytest.raises(RateLimitError) as caught:
            second.take(41, "b")
        assert (caught.value.status, caught.value.code, caught.value.param) == (429, "image_memory_full", "b")
        assert caught.value.headers()["Retry-After"] == "1"
        second.take(40, "b")
        first.give(10)
        assert pool.in_use == 90
    assert pool.in_use == 0


def test_a_holding_gives_back_no_more_than_it_took():
    pool = ImageMemory(100)
    with pool.holding() as held:
        held.take(30, None)
        held.give(50)
        held.give(5)
    assert pool.in_use == 0


def test_a_request_past_its_decoded_budget_is_a_400_at_the_image_that_crosses_it():
    per_image = decoded_bytes("RGB", (2000, 1000))
    metrics = Metrics()
    loader = ImageLoader(ImageLimits(request_bytes=per_image * 2), metrics)
    with pytest.raises(ImageError) as caught:
        asyncio.run(loader.load(conversation(data_url(), data_url(), data_url())))
    assert (caught.value.reason, caught.value.status, caught.value.code) == ("request_bytes", 400, "invalid_image")
    assert loader.memory.in_use == 0
    assert asyncio.run(loader.load(conversation(data_url(), data_url())))  # two fit
    assert prometheus_values(metrics.render().decode(), "maya:image_rejections_total")[
        'maya:image_rejections_total{reason="request_bytes"}'] == 1


def test_an_image_that_could_never_fit_the_pool_is_a_400():
    loader = ImageLoader(ImageLimits(server_bytes=1_000_000))
    with pytest.raises(ImageError) as caught:
        asyncio.run(loader.load(conversation(data_url())))
    assert caught.value.reason == "memory"
    assert loader.memory.in_use == 0


def test_a_busy_pool_is_a_429_and_the_request_leaves_nothing_behind():
    memory = ImageMemory(40_000_000)
    metrics = Metrics()
    loader = ImageLoader(ImageLimits(server_bytes=memory.limit), metrics, memory=memory)
    other = memory.holding()
    other.take(memory.limit - 1_000_000, None)  # another request's images hold most of the pool
    with pytest.raises(RateLimitError) as caught:
        asyncio.run(loader.load(conversation(data_url())))
    assert (caught.value.status, caught.value.code, caught.value.param) == (429, "image_memory_full", "p[0]")
    assert memory.in_use == memory.limit - 1_000_000
    other.give(memory.limit)
    assert asyncio.run(loader.load(conversation(data_url())))  # room again: the same request passes
    assert memory.in_use == 0
    values = prometheus_values(metrics.render().decode(), "maya:image_rejections_total")
    assert values['maya:image_rejections_total{reason="memory_full"}'] == 1


def test_a_requests_decodes_take_turns_so_it_holds_one_decode_at_a_time():
    memory = ImageMemory(10**10)
    peaks = []
    original = memory._take

    def tracking(n: int) -> bool:
        result = original(n)
        peaks.append(memory.in_use)
        return result

    memory._take = tracking
    loader = ImageLoader(ImageLimits(), memory=memory)
    asyncio.run(loader.load(conversation(*[data_url()] * 6)))
    one_decode = max(peaks[i] - peaks[i - 1] for i in range(1, len(peaks)))
    raw = sum(len(data_url()) * 3 // 4 - 22 for _ in range(6))  # every data URL's bytes, taken up front
    assert max(peaks) < one_decode + raw + 1_000_000
    assert memory.in_use == 0


def test_the_pool_is_thread_safe():
    pool = ImageMemory(10**9)

    def churn():
        with pool.holding() as held:
            for _ in range(2000):
                held.take(7, None)
                held.give(3)

    threads = [threading.Thread(target=churn) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert pool.in_use == 0
