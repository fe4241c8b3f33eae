from __future__ import annotations

import pytest


from tests.recorder import Recorder
from tests.scripted import RecordingScriptedEngine
from tests.server import RunningServer, scripted_config


@pytest.fixture
def start_server():
    """start_server(script, **config) → a RunningServer over a RecordingScriptedEngine (tests/scripted.py); stopped after the test.

    Every answer the test gets from it is recorded and, afterwards, validated (OpenAI SDK types,
    the Open Responses schema, OpenAI's error shape): see tests/recorder.py."""
    servers: list[RunningServer] = []
    recorders: list[Recorder] = []

    def start(script=("Hello!",), *, delay: float = 0.0, slots: int = 1, clock=None, **config) -> RunningServer:
        cfg = scripted_config(**config)
        engine = RecordingScriptedEngine(list(script), context_size=cfg.ctx, delay=delay, slots=slots)
        recorders.append(Recorder())
        server = RunningServer(cfg, engine, wrap=recorders[-1], **({"clock": clock} if clock else {}))
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
    for recorder in recorders:
        recorder.check()


def pytest_sessionfinish(session, exitstatus):
    """The Redis store tests' shared redis-server (started on first use) stops with the session."""
    from tests.responses.store_backends import stop_shared_redis

    stop_shared_redis()
