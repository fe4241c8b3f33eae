"""The link to Redis (`redis_link.py`) without a server: the fleet's scope salt is followed (a read that found
nothing checks the salt once; a vanished salt is written back), a fixed secret is never touched, and each
refusal Redis names is a 503 with its reason. Against a real redis-server."""

from __future__ import annotations

import asyncio

import pytest

from maya_server.config import ServerConfig
from maya_server.errors import NotFoundError, StoreUnavailableError
from maya_server.http.auth import owner_of
from maya_server.responses.settings import ResponsesSettings
from maya_server.responses.store.opening import open_store
from maya_server.responses.store.redis_link import REFUSALS

from tests.redis_server import RedisServer, command
from tests.responses.store_backends import SyncStore, open_sync_store, shared_redis, unique_prefix
from tests.responses.store.test_core import answer, item, response

OWNER = owner_of("sk-one")


def open_on(url: str, prefix: str, **config) -> SyncStore:
    """One replica's Redis store, its watch not started (only what a request does happens)."""
    config = ServerConfig(engine="scripted", store=url, store_prefix=prefix, **config)
    return SyncStore(open_store(config, ResponsesSettings()), asyncio.new_event_loop())


def two_stores(**config) -> list[SyncStore]:
    """Two replicas' stores on one prefix of the shared Redis."""
    prefix = unique_prefix()
    return [open_on(shared_redis().url, prefix, **config) for _ in range(2)]


def salt_key(store) -> str:
    return store.store.prefix + "salt"


def test_a_read_that_finds_nothing_follows_a_salt_another_replica_wrote_and_reads_again():
    a, c = two_stores()
    try:
        a.put(OWNER, response("before", answer("b-out")), [item("b-in")])
        url = shared_redis().url
        for key in command(url, "KEYS", a.store.prefix + "*"):
            command(url, "DEL", key)  # what FLUSHALL does to this prefix
        c.put(OWNER, response("after", answer("a-out")), [item("a-in")])  # C writes a new salt
        assert a.get(OWNER, "after")["id"] == "after"  # A misses, sees the salt moved, follows it
        assert a.store.link.figures.salt_changes == 1
        assert a.stats()["redis"]["salt_changes"] == 1
        with pytest.raises(NotFoundError):  # a plain miss stays a 404 (and changes nothing)
            a.get(OWNER, "never-stored")
        assert a.store.link.figures.salt_changes == 1
    finally:
        a.close()
        c.close()


def test_a_vanished_salt_is_written_back_so_what_was_stored_stays_reachable_for_a_new_replica():
    a, _ = two_stores()
    try:
        a.put(OWNER, response("kept", answer("k-out")), [item("k-in")])
        salt = command(shared_redis().url, "GET", salt_key(a))
        command(shared_redis().url, "DEL", salt_key(a))
        a.loop.run_until_complete(a.store.link.watch(a.store.settings.cache_bytes))  # one watch interval
        assert command(shared_redis().url, "GET", salt_key(a)) == salt
        assert a.store.link.figures.salt_restores == 1
        late = open_on(shared_redis().url, a.store.prefix)
        try:
            assert late.get(OWNER, "kept")["id"] == "kept"
        finally:
            late.close()
    finally:
        a.close()
        _.close()


def test_a_secret_file_fixes_the_secret_whatever_redis_holds(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("fleet-secret\n")
    a, _ = two_stores(store_secret_file=str(secret))
    try:
        a.put(OWNER, response("fixed", answer("f-out")), [item("f-in")])
        command(shared_redis().url, "SET", salt_key(a), "someone-elses")
        a.loop.run_until_complete(a.store.link.watch(a.store.settings.cache_bytes))
        assert a.get(OWNER, "fixed")["id"] == "fixed"
        assert a.stats()["redis"]["salt"] == "secret_file" and a.store.link.figures.salt_changes == 0
    finally:
        a.close()
        _.close()


@pytest.mark.parametrize("code, reason", [("READONLY", "readonly"), ("LOADING", "loading"),
                                          ("MASTERDOWN", "masterdown"), ("OOM", "oom"), ("BUSY", "busy"),
                                          ("MISCONF", "misconf"), ("NOREPLICAS", "noreplicas"),
                                          ("NOPERM", "noperm")])
def test_each_refusal_redis_names_is_a_503_with_its_reason(code, reason):
    """Redis's own errors, raised by a script with `redis.error_reply` (what a refused call inside a script
    gives: the code first). Each is its own reason and its own message (`REFUSALS`), which names the code (but
    `oom`'s, which says maxmemory): a client and an operator learn which refusal it was, not just "unavailable"."""
    store = open_sync_store("redis", ResponsesSettings())
    try:
        refuse = store.store.link.script(f"return redis.error_reply('{code} refused here')")
        with pytest.raises(StoreUnavailableError) as raised:
            store.loop.run_until_complete(refuse([]))
        assert raised.value.reason == reason and raised.value.code == "store_unavailable"
        assert raised.value.status == 503 and raised.value.message == REFUSALS[reason]
        assert (code in raised.value.message) if reason != "oom" else ("maxmemory" in raised.value.message)
        assert (code in str(raised.value)) or reason == "oom"
        assert store.store.link.figures.healthy is (reason == "oom")  # oom: the store frees room itself
        unknown = store.store.link.script("return redis.error_reply('WHATEVER a bug')")
        with pytest.raises(Exception) as bug:
            store.loop.run_until_complete(unknown([]))
        assert not isinstance(bug.value, StoreUnavailableError)  # an unknown error stays a bug (a 500)
    finally:
        store.close()


def test_a_standing_refusal_ends_when_a_write_gets_through():
    redis = RedisServer()
    store = open_on(redis.url, unique_prefix())
    try:
        command(redis.url, "CONFIG", "SET", "min-replicas-to-write", "1")
        with pytest.raises(StoreUnavailableError) as raised:
            store.put(OWNER, response("r", answer("o")), [item("i")])
        assert raised.value.reason == "noreplicas" and "NOREPLICAS" in str(raised.value)
        link = store.store.link
        with pytest.raises(StoreUnavailableError):  # a PING would answer: the check is a write
            store.loop.run_until_complete(link.ping())
        assert link.figures.healthy is False and link.report()["refusal"] == "noreplicas"
        command(redis.url, "CONFIG", "SET", "min-replicas-to-write", "0")
        store.loop.run_until_complete(link.ping())
        assert link.figures.healthy is True and link.report()["refusal"] is None
        store.put(OWNER, response("r", answer("o")), [item("i")])
    finally:
        store.close()
        redis.stop()


def test_an_acl_that_keeps_maya_from_its_keys_is_the_named_noperm_503_inside_a_script():
    """Inside a script Redis 7 words a key the ACL user may not touch without the NOPERM code in front."""
    redis = RedisServer()
    store = open_on(redis.url, unique_prefix())
    try:
        store.put(OWNER, response("kept", answer("o")), [item("i")])
        command(redis.url, "ACL", "SETUSER", "admin", "on", "nopass", "~*", "&*", "+@all")
        command(redis.url, "ACL", "SETUSER", "default", "resetkeys", "~elsewhere:*")
        read = lambda: store.get(OWNER, "kept")  # noqa: E731
        write = lambda: store.put(OWNER, response("r", answer("o")), [item("i")])  # noqa: E731
        for call in (read, write):
            with pytest.raises(StoreUnavailableError) as raised:
                call()
            assert raised.value.reason == "noperm" and "NOPERM" in str(raised.value)
    finally:
        store.close()
        redis.stop()
