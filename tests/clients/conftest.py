"""A Maya for the agent clients: the scripted engine speaking GLM syntax, every answer recorded and validated."""

from __future__ import annotations

import pytest

from tests.scripted import RecordingScriptedEngine
from tests.server import RunningServer, scripted_config

from tests.recorder import Recorder

CLIENT_CTX = 65536
"""Codex's first prompt alone is ~6.2k-6.7k real tokens (bench/codex_prompt_tokens.py; more in the scripted
engine's short pieces)."""


@pytest.fixture
def maya():
    """maya(script, **config) → (RunningServer, Recorder); after the test every recorded answer is validated."""
    started: list[tuple[RunningServer, Recorder]] = []

    def start(script, **config) -> tuple[RunningServer, Recorder]:
        cfg = scripted_config(family="glm", ctx=CLIENT_CTX, **config)
        recorder = Recorder()
        server = RunningServer(cfg, RecordingScriptedEngine(list(script), context_size=cfg.ctx), wrap=recorder)
        started.append((server, recorder))
        return server, recorder

    yield start
    for server, _ in started:
        server.stop()
    for _, recorder in started:
        assert recorder.exchanges, "the client sent nothing to Maya"
        recorder.check()
