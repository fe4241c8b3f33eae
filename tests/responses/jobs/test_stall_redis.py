"""Redis stalls past the command timeout while a background task writes: nothing is written twice.

A slow script from another client keeps Redis busy for 2.5 s, past `--store-command-timeout` (1 s): Maya's flush,
waiting in Redis's socket buffer, times out, yet Redis runs it once the script ends, and Maya retries it.
Before, the retry appended the same events again: every reader saw a repeated word, and so did the stored answer.
`APPEND` is idempotent by the count of events the owner wrote (`jobs/redis_lua.py`), so the log holds each event
once and the answer is whole. A real redis-server of the test's own on loopback.
"""

from __future__ import annotations

import json
import threading

import httpx

from tests.redis_server import RedisServer, command
from tests.responses.api.sse import iter_frames
from tests.scripted import RecordingScriptedEngine
from tests.server import RunningServer, scripted_config, wait_for

STALL = """local start = redis.call('TIME')
repeat local now = redis.call('TIME') until (now[1] - start[1]) * 1000000 + (now[2] - start[2]) > 2500000
return 1"""
"""Another client's script that runs for 2.5 s (under Redis's 5 s busy-reply threshold: the others just wait)."""
TEXT = " ".join(f"w{n}" for n in range(300))


def test_a_flush_retried_after_a_stall_it_outlived_writes_nothing_twice():
    redis = RedisServer()
    server = RunningServer(scripted_config(store=redis.url, store_command_timeout=1.0),
                           RecordingScriptedEngine([TEXT], delay=0.01))
    try:
        created = httpx.post(server.url + "/v1/responses", timeout=30, json={
            "model": "m", "input": "Count", "background": True, "store": True}).json()
        events: list[dict] = []
        reader = threading.Thread(target=_read, args=(server, created["id"], events), daemon=True)
        reader.start()
        assert wait_for(lambda: sum(e["type"] == "response.output_text.delta" for e in events) >= 20, 20.0)
        command(redis.url, "EVAL", STALL, 0)  # Redis does nothing else for 2.5 s: past the 1 s command timeout
        reader.join(60)
        final = httpx.get(f"{server.url}/v1/responses/{created['id']}", timeout=30).json()
        replay: list[dict] = []
        _read(server, created["id"], replay)
    finally:
        server.stop()
        redis.stop()
    assert not reader.is_alive()
    for seen in (events, replay):
        assert seen[-1]["type"] == "response.completed", seen[-3:]
        assert "".join(e["delta"] for e in seen if e["type"] == "response.output_text.delta") == TEXT
        assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    assert final["status"] == "completed"
    assert final["output"][0]["content"][0]["text"] == TEXT


def _read(server: RunningServer, response_id: str, into: list) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as http, \
            http.stream("GET", f"/v1/responses/{response_id}?stream=true") as answer:
        for _, data in iter_frames(answer.iter_lines()):
            into.append(json.loads(data))
