"""`--store-wait-replicas`: a write the client is told of waits until that many Redis replicas have it.

A real primary and replica on loopback (`REPLICAOF`). With the replica up, a stored response, a background task
and its end are 200s, and the replica holds them the moment the client hears of them. With the replica gone, the
same writes answer 503 `store_unavailable` within the wait, saying the write is on the primary only; without
the flag they go on answering 200 (replication is asynchronous: what a failover may lose).
"""

from __future__ import annotations

import time

import httpx
import pytest

from maya_server.config import build_config
from maya_server.errors import ConfigError
from tests.redis_server import RedisServer, command
from tests.scripted import RecordingScriptedEngine
from tests.server import RunningServer, scripted_config, wait_for


def _replica_of(primary: RedisServer) -> RedisServer:
    replica = RedisServer()
    command(replica.url, "REPLICAOF", "127.0.0.1", str(primary.port))
    assert wait_for(lambda: command(replica.url, "ROLE")[3] == b"connected", 20.0)
    return replica


def _post(server: RunningServer, **body) -> httpx.Response:
    return httpx.post(server.url + "/v1/responses", timeout=30, json={"model": "m", "input": "Hi", **body})


def test_acknowledged_writes_wait_for_the_replica_and_a_missing_one_is_a_503_not_a_silent_risk():
    primary = RedisServer()
    replica = _replica_of(primary)
    waiting = RunningServer(scripted_config(store=primary.url, store_prefix="w:", store_wait_replicas=1),
                            RecordingScriptedEngine(["Kept."]))
    plain = RunningServer(scripted_config(store=primary.url, store_prefix="p:"), RecordingScriptedEngine(["Kept."]))
    try:
        stored = _post(waiting, store=True)
        assert stored.status_code == 200
        keys = command(replica.url, "KEYS", "w:*")  # on the replica the moment the client heard of it
        assert any(stored.json()["id"].encode() in key for key in keys), keys
        task = _post(waiting, store=True, background=True)
        assert task.status_code == 200
        assert wait_for(lambda: httpx.get(f"{waiting.url}/v1/responses/{task.json()['id']}", timeout=10)
                        .json()["status"] == "completed", 10.0)
        replica.stop()  # the only replica goes
        started = time.monotonic()
        refused = _post(waiting, store=True)
        took = time.monotonic() - started
        unadmitted = _post(waiting, store=True, background=True)
        unsure = _post(plain, store=True)
        status = httpx.get(waiting.url + "/v1/status", timeout=10).json()["responses"]["cache"]["redis"]
    finally:
        waiting.stop()
        plain.stop()
        replica.stop()
        primary.stop()
    assert refused.status_code == 503
    error = refused.json()["error"]
    assert error["code"] == "store_unavailable" and "only 0 of the 1 replicas" in error["message"], error
    assert took < 5.0  # the wait (0.5 s), not a hang
    assert unadmitted.status_code == 503 and unadmitted.json()["error"]["code"] == "store_unavailable"
    assert unsure.status_code == 200  # without the flag: acknowledged, on the primary alone
    assert status["wait_replicas"] == 1 and status["unreplicated"] >= 2


def test_the_wait_must_be_shorter_than_a_connection_s_read_timeout():
    with pytest.raises(ConfigError) as raised:
        build_config({}, {}, {"engine": "scripted", "store": "redis://127.0.0.1:1/0", "store_wait_replicas": "1",
                              "store_wait_timeout": "2"})
    assert raised.value.name == "store_wait_timeout"
