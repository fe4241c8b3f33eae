from __future__ import annotations

import pytest

from maya_server.engine.scripted import ScriptedEngine

from .server import RunningServer, scripted_config


@pytest.fixture
def start_server():
    """start_server(script, **config) → a RunningServer over a ScriptedEngine; stopped after the test."""
    servers: list[RunningServer] = []

    def start(script=("Hello!",), *, delay: float = 0.0, slots: int = 1, clock=None, **config) -> RunningServer:
        cfg = scripted_config(**config)
        engine = ScriptedEngine(list(script), context_size=cfg.ctx, delay=delay, slots=slots)
        server = RunningServer(cfg, engine, **({"clock": clock} if clock else {}))
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
