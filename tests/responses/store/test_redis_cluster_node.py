"""`--store` pointed at a node of a Redis Cluster, which Maya does not support yet: a clear 503, never a 500.

Two real cluster nodes on loopback (`--cluster-enabled yes`), each serving half of the slots. Before, Maya started
and then every stored route and `/v1/status` itself was a plain 500 (`MovedError`). Now the node's answers
(MOVED, a script's cross-slot refusal) are the refusal `cluster`: stored requests get 503 `store_unavailable`
naming it, `/v1/status` answers 200 and says it, and requests that store nothing still work.
"""

from __future__ import annotations

import httpx

from tests.redis_server import RedisServer, command, free_port
from tests.scripted import RecordingScriptedEngine
from tests.server import RunningServer, scripted_config, wait_for

CLUSTER = ("--cluster-enabled", "yes", "--cluster-node-timeout", "2000")


def _cluster() -> list[RedisServer]:
    # the bus port is given: by default it is the port + 10000, past 65535 for a high free port
    buses = [free_port() for _ in range(2)]
    nodes = [RedisServer(extra=CLUSTER + ("--cluster-config-file", f"nodes-{n}.conf", "--cluster-port", str(bus)))
             for n, bus in enumerate(buses)]
    command(nodes[0].url, "CLUSTER", "ADDSLOTSRANGE", 0, 8191)
    command(nodes[1].url, "CLUSTER", "ADDSLOTSRANGE", 8192, 16383)
    command(nodes[0].url, "CLUSTER", "MEET", "127.0.0.1", nodes[1].port, buses[1])
    assert wait_for(lambda: all(b"cluster_state:ok" in command(node.url, "CLUSTER", "INFO") for node in nodes), 30.0)
    return nodes


def test_a_cluster_node_is_named_and_answered_503_never_500():
    nodes = _cluster()
    server = RunningServer(scripted_config(store=nodes[0].url), RecordingScriptedEngine(["Hi."]))
    try:
        stored = [httpx.post(server.url + "/v1/responses", timeout=30,
                             json={"model": "m", "input": f"Hi {n}", "store": True}) for n in range(6)]
        plain = httpx.post(server.url + "/v1/responses", timeout=30, json={"model": "m", "input": "Hi"})
        status = httpx.get(server.url + "/v1/status", timeout=10)
    finally:
        server.stop()
        for node in nodes:
            node.stop()
    assert [answer.status_code for answer in stored] == [503] * 6, [a.text for a in stored]
    error = stored[0].json()["error"]
    assert error["code"] == "store_unavailable" and "Redis Cluster" in error["message"]
    assert plain.status_code == 200
    assert status.status_code == 200
    assert status.json()["responses"]["cache"]["redis"]["refusal"] == "cluster"
