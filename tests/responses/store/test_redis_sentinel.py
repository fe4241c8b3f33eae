"""`--store redis+sentinel://…`: Maya asks the sentinels for the primary, and follows it across a failover.

A primary, a replica and three sentinels on loopback (`tests/redis_sentinel.py`). A stored response and a
background task work through the sentinels' primary; after `kill -9` of the primary, the sentinels promote the
replica, and stored requests answer 503 `store_unavailable` while there is none (never a 500), then 200 on the new
primary without a restart; what was stored before the failover and had reached the replica is still there.
"""

from __future__ import annotations

import time

import httpx

from tests.redis_sentinel import SETTLE_S, SentinelFleet
from tests.redis_server import command
from tests.scripted import RecordingScriptedEngine
from tests.server import RunningServer, scripted_config, wait_for


def _post(server: RunningServer, **body) -> httpx.Response:
    return httpx.post(server.url + "/v1/responses", timeout=30, json={"model": "m", "input": "Hi", **body})


def test_the_store_follows_the_primary_the_sentinels_name_across_a_failover():
    fleet = SentinelFleet()
    server = RunningServer(scripted_config(store=fleet.url), RecordingScriptedEngine(["Kept."]))
    try:
        before = _post(server, store=True)
        assert before.status_code == 200, before.text
        task = _post(server, store=True, background=True)
        assert task.status_code == 200
        assert wait_for(lambda: httpx.get(f"{server.url}/v1/responses/{task.json()['id']}", timeout=10)
                        .json()["status"] == "completed", 10.0)
        old = fleet.primary.port
        assert command(fleet.primary.url, "WAIT", 1, 5000) == 1  # the replica has all of it (replication is async)
        fleet.primary.kill()
        statuses = []
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline:
            statuses.append(_post(server, store=True).status_code)
            if statuses[-3:] == [200, 200, 200]:
                break
            time.sleep(0.2)
        promoted = fleet.primary_port()
        kept = httpx.get(f"{server.url}/v1/responses/{before.json()['id']}", timeout=10)
        status = httpx.get(server.url + "/v1/status", timeout=10)
    finally:
        server.stop()
        fleet.stop()
    assert promoted == fleet.replica.port != old
    assert set(statuses) <= {200, 503}, statuses  # the switch: 503 at worst, never a 500
    assert statuses[-3:] == [200, 200, 200], statuses  # the new primary serves, without a restart
    assert kept.status_code == 200 and kept.json()["output"][0]["content"][0]["text"] == "Kept."
    assert status.status_code == 200


def test_a_sentinel_url_is_read_and_shown_without_its_password_and_a_malformed_one_is_refused_at_start():
    from maya_server.errors import ConfigError
    from maya_server.util.store_url import check_store_url, sentinel_address, shown_url

    url = "rediss+sentinel://maya:s%40cret@10.0.0.1:26379,10.0.0.2:26379/mymaster/2"
    address = sentinel_address(check_store_url("store", url))
    assert address.sentinels == (("10.0.0.1", 26379), ("10.0.0.2", 26379)) and address.service == "mymaster"
    assert (address.db, address.username, address.password, address.tls) == (2, "maya", "s@cret", True)
    assert shown_url(url) == "rediss+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster/2"
    for bad in ("redis+sentinel://10.0.0.1/mymaster", "redis+sentinel://10.0.0.1:26379",
                "redis+sentinel://10.0.0.1:26379/mymaster/zero", "redis+sentinel://:pw@/mymaster"):
        try:
            check_store_url("store", bad)
        except ConfigError as error:
            assert "pw" not in str(error)
        else:
            raise AssertionError(f"{bad} was accepted")
