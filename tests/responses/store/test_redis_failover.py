"""A managed Redis endpoint that flips on failover: the address stays, the primary behind it changes, and the old
primary, still reachable, becomes a replica that answers READONLY.

Real redis-servers on loopback behind a switchable proxy (`tests/tcp_proxy.py`): Maya's pooled connections were
opened to the old primary through the proxy and stay there; new ones reach the new primary. A connection that
answers READONLY must be dropped, so the next command opens a new one and finds the new primary, whose script
cache is empty (NOSCRIPT: the scripts load again by themselves). Before, every stored request was a 503 READONLY
until Maya was restarted. The switch itself is a short 503 `store_unavailable`, never a 500.
"""

from __future__ import annotations

import time

import httpx

from tests.redis_server import RedisServer, command
from tests.scripted import RecordingScriptedEngine
from tests.server import RunningServer, prometheus_values, scripted_config, wait_for
from tests.tcp_proxy import SwitchableProxy

ROUNDS = 40


def _store(server: RunningServer, text: str) -> int:
    answer = httpx.post(server.url + "/v1/responses", timeout=30,
                        json={"model": "m", "input": text, "store": True})
    return answer.status_code


def _redis(server: RunningServer) -> dict:
    return httpx.get(server.url + "/v1/status", timeout=10).json()["responses"]["cache"]["redis"]


def test_after_the_endpoint_flips_a_read_only_old_primary_is_left_and_the_new_one_serves():
    old, new = RedisServer(), RedisServer()
    proxy = SwitchableProxy(old.port)
    server = RunningServer(scripted_config(store=f"redis://127.0.0.1:{proxy.port}/0", store_pool_size=4),
                           RecordingScriptedEngine(["Stored."]))
    try:
        before = [_store(server, f"before {n}") for n in range(4)]  # connections pooled to the old primary
        # the failover: the old primary follows the new one (READONLY from now on), the endpoint points at the new
        command(old.url, "REPLICAOF", "127.0.0.1", str(new.port))
        proxy.switch(new.port)
        deadline = time.monotonic() + 20
        while command(old.url, "ROLE")[0] != b"slave" and time.monotonic() < deadline:
            time.sleep(0.05)
        statuses = []
        for n in range(ROUNDS):
            statuses.append(_store(server, f"after {n}"))
        # the standing READONLY refusal is over once the watch's write check gets through (on the new primary)
        cleared = wait_for(lambda: _redis(server)["refusal"] is None, 15.0)
        status_page = httpx.get(server.url + "/v1/status", timeout=10)
        metrics = httpx.get(server.url + "/metrics/prometheus", timeout=10).text
    finally:
        server.stop()
        proxy.close()
        old.stop()
        new.stop()
    assert before == [200] * 4
    assert set(statuses) <= {200, 503}, statuses  # the switch is a 503 at worst, never a 500
    assert statuses[-ROUNDS // 2:] == [200] * (ROUNDS // 2), statuses  # then the new primary serves every one
    assert statuses.count(503) <= 4, statuses  # one per connection pooled to the old primary, at most
    assert status_page.status_code == 200
    redis = status_page.json()["responses"]["cache"]["redis"]
    assert redis["primary_moves"] >= max(1, statuses.count(503)) and cleared  # the watch may meet it too
    moves = prometheus_values(metrics, "maya:responses_cache_redis_primary_moves_total")
    assert list(moves.values()) == [float(redis["primary_moves"])]
