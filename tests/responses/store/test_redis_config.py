"""What Maya says about Redis's memory configuration (`redis_config.py`): an evicting `maxmemory-policy` and a byte
limit above `maxmemory` are warnings in /v1/status and the metrics; `--store-require-noeviction` refuses to start
on an evicting policy (exit 2, naming the fix); a Redis that refuses `CONFIG GET` is said so once, and Maya goes
on. Each test has a redis-server of its own (the settings are Redis-wide)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from maya_server.responses.store.redis_config import RedisConfigView, evicts_maya_keys

from tests.maya_process import Fleet
from tests.redis_server import RedisServer, command
from tests.responses.store_backends import unique_prefix
from tests.server import prometheus_values, wait_for

BOUND_S = 15.0
PASSWORD = "maya-test-password"


@pytest.fixture
def redis():
    server = RedisServer()
    yield server
    server.stop()


def cache(server) -> dict:
    with server.http() as http:
        return http.get("/v1/status").json()["responses"]["cache"]


def warning_metrics(server) -> dict[str, float]:
    with server.http() as http:
        return prometheus_values(http.get("/metrics/prometheus").text, "maya:responses_cache_redis_config_warnings")


def kinds(server) -> set[str]:
    return {warning["kind"] for warning in cache(server)["redis"]["warnings"]}


def test_an_evicting_policy_is_a_warning_in_status_and_the_metrics_until_it_is_fixed(start_server, redis, caplog):
    command(redis.url, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
    server = start_server(store=redis.url, store_prefix=unique_prefix())
    caplog.set_level(logging.WARNING)
    assert wait_for(lambda: "evicting_policy" in kinds(server), BOUND_S), cache(server)
    section = cache(server)["redis"]
    assert section["policy"] == "allkeys-lru" and section["config_readable"] is True
    message = section["warnings"][0]["message"]
    assert "CONFIG SET maxmemory-policy noeviction" in message and "maxmemory-policy noeviction" in message
    assert warning_metrics(server)['maya:responses_cache_redis_config_warnings{warning="evicting_policy"}'] == 1
    command(redis.url, "CONFIG", "SET", "maxmemory-policy", "noeviction")
    assert wait_for(lambda: kinds(server) == set(), BOUND_S), cache(server)
    assert warning_metrics(server)['maya:responses_cache_redis_config_warnings{warning="evicting_policy"}'] == 0
    assert caplog.text.count("allkeys-lru") == 1  # logged when it appeared, not every probe


def test_a_volatile_policy_is_no_warning_since_maya_s_keys_have_no_ttl(start_server, redis):
    command(redis.url, "CONFIG", "SET", "maxmemory-policy", "volatile-lru")
    server = start_server(store=redis.url, store_prefix=unique_prefix())
    assert wait_for(lambda: cache(server)["redis"]["policy"] == "volatile-lru", BOUND_S), cache(server)
    assert kinds(server) == set()


def test_a_byte_limit_above_maxmemory_is_a_warning(start_server, redis):
    command(redis.url, "CONFIG", "SET", "maxmemory", str(10 * 1024 * 1024))
    server = start_server(store=redis.url, store_prefix=unique_prefix())  # the default limit: 64 MiB
    assert wait_for(lambda: "bytes_over_maxmemory" in kinds(server), BOUND_S), cache(server)
    assert cache(server)["redis"]["maxmemory"] == 10 * 1024 * 1024
    assert warning_metrics(server)['maya:responses_cache_redis_config_warnings{warning="bytes_over_maxmemory"}'] == 1
    fits = start_server(store=redis.url, store_prefix=unique_prefix(),
                        environ={"MAYA_GLM_RESPONSES_CACHE_BYTES": str(8 * 1024 * 1024)})
    assert wait_for(lambda: cache(fits)["redis"]["maxmemory"] == 10 * 1024 * 1024, BOUND_S), cache(fits)
    assert "bytes_over_maxmemory" not in kinds(fits)


def test_a_redis_that_refuses_config_get_is_said_once_and_the_store_works(start_server, redis, caplog):
    command(redis.url, "ACL", "SETUSER", "maya", "on", f">{PASSWORD}", "~*", "&*", "+@all", "-config")
    server = start_server(store=f"redis://maya:{PASSWORD}@127.0.0.1:{redis.port}/0", store_prefix=unique_prefix())
    caplog.set_level(logging.WARNING)
    assert wait_for(lambda: cache(server)["redis"]["config_readable"] is False, BOUND_S), cache(server)
    assert kinds(server) == {"config_unreadable"} and cache(server)["healthy"] is True
    stored = server.client().responses.create(model="m", input="hi", store=True)
    assert server.client().responses.retrieve(stored.id).id == stored.id
    commands = cache(server)["commands"]
    assert wait_for(lambda: cache(server)["commands"] > commands + 8, BOUND_S)  # two more probes at least
    assert caplog.text.count("refused CONFIG GET") == 1
    assert PASSWORD not in caplog.text


def maya(*args: str, environ: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m maya_server` run to its end (it is expected to refuse to start)."""
    argv = [sys.executable, "-m", "maya_server", "--engine", "scripted", "--family", "chatml", "--port", "0", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env={**os.environ, **(environ or {})},
                          stdin=subprocess.DEVNULL)


def test_require_noeviction_refuses_to_start_on_an_evicting_policy_naming_the_fix(redis):
    command(redis.url, "CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")
    done = maya("--store", redis.url, "--store-require-noeviction")
    assert done.returncode == 2, done.stderr
    assert "invalid configuration: store_require_noeviction" in done.stderr
    assert "allkeys-lfu" in done.stderr and "CONFIG SET maxmemory-policy noeviction" in done.stderr
    assert "Traceback" not in done.stderr


def test_require_noeviction_from_the_environment_refuses_a_policy_it_cannot_read(redis):
    command(redis.url, "ACL", "SETUSER", "maya", "on", f">{PASSWORD}", "~*", "&*", "+@all", "-config")
    done = maya("--store", f"redis://maya:{PASSWORD}@127.0.0.1:{redis.port}/0",
                environ={"MAYA_STORE_REQUIRE_NOEVICTION": "1"})
    assert done.returncode == 2, done.stderr
    assert "refuses CONFIG GET" in done.stderr and PASSWORD not in done.stderr


def test_require_noeviction_starts_on_noeviction(redis, tmp_path):
    fleet = Fleet(tmp_path, store=redis.url, prefix=unique_prefix())
    try:
        replica = fleet.start(("ok",), "--store-require-noeviction")
        assert replica.status()["responses"]["cache"]["backend"] == "redis"
    finally:
        fleet.close()


@pytest.mark.parametrize("policy, evicts", [("noeviction", False), ("volatile-lru", False), ("volatile-ttl", False),
                                            ("allkeys-lru", True), ("allkeys-random", True), (None, False)])
def test_which_policies_evict_maya_s_keys(policy, evicts):
    assert evicts_maya_keys(policy) is evicts


def test_a_warning_is_reported_once_when_it_appears_and_once_when_it_goes():
    view = RedisConfigView()
    appeared, gone = view.update({"maxmemory": 0, "policy": "allkeys-lru"}, cache_bytes=1)
    assert list(appeared) == ["evicting_policy"] and gone == []
    assert view.update({"maxmemory": 0, "policy": "allkeys-lru"}, cache_bytes=1) == ({}, [])
    assert view.update({"maxmemory": 0, "policy": "noeviction"}, cache_bytes=1) == ({}, ["evicting_policy"])
    assert view.report()["warnings"] == []


def test_require_noeviction_refuses_to_start_when_redis_cannot_be_reached():
    from tests.redis_server import free_port

    done = maya("--store", f"redis://127.0.0.1:{free_port()}/0", "--store-require-noeviction",
                "--store-connect-timeout", "0.5")
    assert done.returncode == 2, done.stderr
    assert "cannot read the maxmemory-policy" in done.stderr and "Traceback" not in done.stderr
