"""The server's idle loop: it wakes once a second (TICK_S), yet a stop asked from any thread or by a signal is
seen at once, and each wake refreshes uvicorn's Date header."""

from __future__ import annotations

import signal
import threading
import time

import httpx
import pytest
import uvicorn

from maya_server.http import shutdown
from maya_server.http.shutdown import GracefulServer


async def _app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def _no_drain() -> None:
    pass


class TickLog(GracefulServer):
    """Records the counter each tick hands to uvicorn's `on_tick`."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.ticks: list[int] = []

    async def on_tick(self, counter: int) -> bool:
        self.ticks.append(counter)
        return await super().on_tick(counter)


def serve(server_class=GracefulServer) -> tuple[GracefulServer, threading.Thread, str]:
    server = server_class(uvicorn.Config(_app, host="127.0.0.1", port=0, log_level="warning"), drain=_no_drain)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    return server, thread, f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"


@pytest.fixture
def hour_long_tick(monkeypatch):
    """A tick too long for any test to wait out: only a wake can stop the server."""
    monkeypatch.setattr(shutdown, "TICK_S", 3600.0)


def test_request_exit_from_another_thread_stops_the_server_without_waiting_for_a_tick(hour_long_tick):
    server, thread, url = serve()
    assert httpx.get(url).status_code == 204
    server.request_exit()
    thread.join(timeout=20)
    assert not thread.is_alive()


def test_a_signal_wakes_the_loop(hour_long_tick):
    server, thread, url = serve()
    server.handle_exit(signal.SIGINT, None)  # what uvicorn's signal handler calls
    thread.join(timeout=20)
    assert not thread.is_alive()


def test_a_stop_set_by_hand_is_still_seen_at_the_next_tick(monkeypatch):
    monkeypatch.setattr(shutdown, "TICK_S", 0.01)
    server, thread, _ = serve()
    server.should_exit = True  # uvicorn's own way: no wake, the tick finds it
    thread.join(timeout=20)
    assert not thread.is_alive()


def test_every_tick_refreshes_the_date_header(monkeypatch):
    monkeypatch.setattr(shutdown, "TICK_S", 0.01)
    server, thread, url = serve(TickLog)
    deadline = time.monotonic() + 20
    while len(server.ticks) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.request_exit()
    thread.join(timeout=20)
    assert len(server.ticks) >= 5
    assert all(counter % 10 == 0 for counter in server.ticks)  # uvicorn refreshes the Date on multiples of ten
    assert len(set(server.ticks)) == len(server.ticks)
