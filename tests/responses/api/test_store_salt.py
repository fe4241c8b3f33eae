"""One scope salt for the fleet, whatever happens to Redis (no `--store-secret-file`): after a FLUSHALL, an empty
restart of Redis, or the salt key deleted, the replicas agree again within one watch interval, so a response
stored through one is read through any other. Real servers on loopback (tests/server.py) on a redis-server of
the test's own (FLUSHALL and restarts are Redis-wide)."""

from __future__ import annotations

import time

import pytest

from tests.redis_server import RedisServer, command
from tests.responses.store_backends import store_stats, unique_prefix

BOUND_S = 15.0
POLL_S = 0.25


@pytest.fixture
def redis():
    server = RedisServer()
    yield server
    server.stop()


def replica(start_server, redis: RedisServer, prefix: str):
    return start_server(["ok"], store=redis.url, store_prefix=prefix)


def readable(reader, response_id: str) -> bool:
    with reader.http() as http:
        return http.get(f"/v1/responses/{response_id}").status_code == 200


def stored(writer) -> str | None:
    """A new response stored through `writer`, its id (None while the store refuses: Redis restarting)."""
    with writer.http() as http:
        answer = http.post("/v1/responses", json={"model": "m", "input": "hello", "store": True})
    return answer.json()["id"] if answer.status_code == 200 else None


def agree(*pairs) -> bool:
    """Whether, for each (writer, reader), a response stored through the writer now is read through the reader."""
    for writer, reader in pairs:
        response_id = stored(writer)
        if response_id is None or not readable(reader, response_id):
            return False
    return True


def eventually(condition) -> bool:
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(POLL_S)
    return False


def test_after_flushall_a_replica_started_afterwards_and_the_others_agree(start_server, redis):
    prefix = unique_prefix()
    a, b = replica(start_server, redis, prefix), replica(start_server, redis, prefix)
    assert agree((a, b), (b, a))
    command(redis.url, "FLUSHALL")
    c = replica(start_server, redis, prefix)  # its first request finds no salt in Redis
    assert stored(c) is not None
    assert eventually(lambda: agree((a, c), (c, a), (b, c), (c, b))), "the replicas never agreed on one salt"
    follows = [store_stats(server)["redis"] for server in (a, b, c)]
    assert sum(section["salt_changes"] + section["salt_restores"] for section in follows) >= 1


def test_after_an_empty_restart_of_redis_and_one_replica_restarted_all_cross_reads_work(start_server, redis):
    prefix = unique_prefix()
    a, b = replica(start_server, redis, prefix), replica(start_server, redis, prefix)
    assert agree((a, b), (b, a))
    redis.kill()
    redis.start()  # no persistence: empty
    b.stop()
    b = replica(start_server, redis, prefix)
    assert eventually(lambda: agree((a, b), (b, a))), "the replicas never agreed on one salt"


def test_the_salt_key_deleted_by_hand_is_written_back_and_what_was_stored_stays_readable(start_server, redis):
    prefix = unique_prefix()
    a, b = replica(start_server, redis, prefix), replica(start_server, redis, prefix)
    first, second = stored(a), stored(b)
    command(redis.url, "DEL", prefix + "salt")
    assert eventually(lambda: command(redis.url, "GET", prefix + "salt") is not None), "nobody wrote the salt back"
    late = replica(start_server, redis, prefix)  # reads the salt written back, not one of its own
    for reader in (a, b, late):
        assert readable(reader, first) and readable(reader, second)
    assert sum(store_stats(server)["redis"]["salt_restores"] for server in (a, b)) >= 1
