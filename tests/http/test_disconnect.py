"""A client that goes away stops its generation and frees the engine for the next request."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from maya_server.http.disconnect import unless
from tests.server import wait_for


def test_streaming_client_disconnect_cancels_the_engine(start_server):
    server = start_server(["tick " * 400], delay=0.01)
    with server.http() as http:
        with http.stream("POST", "/v1/chat/completions",
                         json={"messages": [{"role": "user", "content": "go"}], "stream": True}) as response:
            lines = response.iter_lines()
            received = [next(lines) for _ in range(6)]
    assert any(line.startswith("data: ") for line in received)
    assert wait_for(lambda: server.engine.cancelled == 1)
    assert wait_for(lambda: server.app.state.service.queue.busy == 0)
    generated = server.app.state.service.engine.params  # the engine saw exactly one request
    assert len(generated) == 1
    server.engine.set_script(["done"])
    after = server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}])
    assert after.choices[0].message.content == "done"


def test_non_streaming_client_disconnect_cancels_the_engine(start_server):
    server = start_server(["tick " * 400], delay=0.01)
    try:
        httpx.post(server.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "go"}]}, timeout=0.3)
    except httpx.TimeoutException:
        pass
    assert wait_for(lambda: server.engine.cancelled == 1)
    assert wait_for(lambda: server.app.state.service.queue.busy == 0)


def test_a_waiting_request_whose_client_leaves_never_reaches_the_engine(start_server):
    server = start_server(["tick " * 100], delay=0.01)
    with server.http() as http:
        with http.stream("POST", "/v1/chat/completions",
                         json={"messages": [{"role": "user", "content": "first"}], "stream": True}) as first:
            first_lines = first.iter_lines()  # keep a reference: a collected iterator closes the response
            next(first_lines)
            try:
                httpx.post(server.url + "/v1/chat/completions",
                           json={"messages": [{"role": "user", "content": "second"}]}, timeout=0.2)
            except httpx.TimeoutException:
                pass
            assert wait_for(lambda: server.app.state.service.queue.waiting == 0)
    assert wait_for(lambda: server.app.state.service.queue.busy == 0)
    assert server.engine.calls == 1


class Stopped(Exception):
    pass


def test_unless_cancelled_from_outside_is_cancelled_not_interrupted():
    """A stream's pump races the client (outer) and the shutdown (inner): a client that leaves cancels the inner
    race, which must not read as its own stop (the shutdown's farewell), but as the cancellation it is."""

    async def main() -> None:
        never = asyncio.Event()
        work_cancelled = asyncio.Event()

        async def work() -> None:
            try:
                await asyncio.sleep(10)
            finally:
                work_cancelled.set()

        inner = asyncio.ensure_future(unless(never.wait(), work(), Stopped))
        await asyncio.sleep(0.01)
        inner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await inner
        assert work_cancelled.is_set()

    asyncio.run(main())


def test_unless_whose_stop_comes_first_is_interrupted():
    async def main() -> None:
        with pytest.raises(Stopped):
            await unless(asyncio.sleep(0.01), asyncio.sleep(10), Stopped)

    asyncio.run(main())
