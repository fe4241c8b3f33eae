"""What only the Redis store has: the bytes it counts are what Redis holds, owner scopes that hold no
credential, a 503 within the command timeout when Redis is away or slow, and settings that never show a
password. Each test runs against a real redis-server (skipped, saying why, where none is installed)."""

from __future__ import annotations

import hashlib
import time

import pytest

from maya_server.config import ServerConfig, build_config
from maya_server.errors import ConfigError, NotFoundError, StoreUnavailableError
from maya_server.http.auth import owner_of
from maya_server.responses.settings import ResponsesSettings
from maya_server.responses.store import redis_lua
from maya_server.util.store_url import shown_url

from tests.redis_server import RedisServer, command, free_port
from tests.responses.store_backends import open_sync_store, shared_redis
from tests.responses.store.test_core import answer, item, put_chain, response

API_KEY = "sk-very-secret-key"


def keys_of(store) -> list[bytes]:
    return sorted(command(shared_redis().url, "KEYS", store.store.prefix + "*"))


def held_bytes(store) -> int:
    """What Redis holds for this store's keys (MEMORY USAGE, every element sampled), but the salt."""
    url = shared_redis().url
    return sum(command(url, "MEMORY", "USAGE", key, "SAMPLES", "0") for key in keys_of(store)
               if not key.endswith(b"salt"))


@pytest.mark.parametrize("text_size", [100, 2000, 20_000])
def test_the_bytes_counted_are_the_bytes_redis_holds(text_size):
    """Within 15 %: Redis's per-key overheads are estimates (they vary with encodings and allocator size classes;
    measured 0.90-0.98 of MEMORY USAGE here)."""
    store = open_sync_store("redis", ResponsesSettings())
    try:
        for chain in range(4):
            put_chain(store, owner_of(f"key-{chain}"), 12, prefix=f"c{chain}-")
        for n in range(10):
            store.put(owner_of("key-x"), response(f"single{n}", answer(f"s{n}-out", "z" * text_size)),
                      [item(f"s{n}-in", "u" * text_size)])
        counted, held = store.stats()["bytes"], held_bytes(store)
    finally:
        store.close()
    assert 0.85 * held <= counted <= 1.15 * held, f"counted {counted}, Redis holds {held}"


DATA_KINDS = ("e:", "l:", "b:")


def test_only_data_keys_carry_a_ttl_and_it_outlasts_the_responses_that_need_them():
    """Under `volatile-*` Redis may evict only keys with a TTL: a response's data keys (its entry, lineage, item
    blocks) carry one, at least the response's own expiry, so Redis can never take the bookkeeping (counts, users
    sets, indexes, figures), nor an envelope, which all responses of the same settings share; a later turn extends
    what it shares with earlier ones."""
    ttl_s = 600
    store = open_sync_store("redis", ResponsesSettings(cache_ttl_s=ttl_s))
    url = shared_redis().url
    try:
        put_chain(store, "owner", 3)
        base = store.begin("owner", "r1")
        store.put("owner", response("branch", answer("b-out")), [item("b-in")], base)  # a copied lineage
        base.release()
        store.put("owner", response("single", answer("s-out")), [item("s-in")])
        kinds = {"data": 0, "bookkeeping": 0}
        envelopes = {command(url, "HGET", store.store.prefix + f"e:{rid}", "env").decode()
                     for rid in ("r0", "r1", "r2", "branch", "single")}
        for name in keys_of(store):
            short = name.decode().removeprefix(store.store.prefix)
            ttl = command(url, "TTL", name)
            if short.startswith("b:") and short.rsplit(":", 1)[1] in envelopes:
                assert ttl == -1, short  # shared by every response of the settings: never Redis's to evict
            elif short.startswith(DATA_KINDS):
                kinds["data"] += 1
                assert ttl_s < ttl <= ttl_s + redis_lua.DATA_TTL_MARGIN_S, (short, ttl)
            else:
                kinds["bookkeeping"] += 1
                assert ttl == -1, (short, ttl)
        assert kinds["data"] >= 12 and kinds["bookkeeping"] >= 8, kinds
        lineage = store.store.prefix + "l:" + command(url, "HGET", store.store.prefix + "e:r0", "l").decode()
        command(url, "EXPIRE", lineage, 60)  # as if written long ago: the next turn extends it and its blocks
        first_block = store.store.prefix + "b:" + command(url, "HGET", store.store.prefix + "e:r0", "o").decode() \
            + ":" + command(url, "LINDEX", lineage, 0).decode()
        command(url, "EXPIRE", first_block, 60)
        base = store.begin("owner", "r2")
        store.put("owner", response("r3", answer("r3-out")), [item("r3-in")], base)
        base.release()
        assert command(url, "TTL", lineage) > ttl_s and command(url, "TTL", first_block) > ttl_s
    finally:
        store.close()


def test_deleting_everything_leaves_no_key_but_the_figures():
    store = open_sync_store("redis", ResponsesSettings())
    try:
        put_chain(store, "owner", 5)
        base = store.begin("owner", "r2")
        store.put("owner", response("branch", answer("b-out")), [item("b-in")], base)
        base.release()
        for rid in ("r3", "r0", "branch", "r4", "r1", "r2"):
            store.delete("owner", rid)
        left = {key.decode().removeprefix(store.store.prefix) for key in keys_of(store)}
        assert store.stats()["bytes"] == 0
    finally:
        store.close()
    assert left <= {"n", "g", "salt"}, left  # the fleet's counters, an empty generation table, the salt


def test_redis_keys_and_values_hold_no_credential_or_owner_hash(tmp_path):
    secret = tmp_path / "scope-secret"
    secret.write_text("a secret shared by the replicas\n")
    for options in ({}, {"store_secret_file": str(secret)}):
        store = open_sync_store("redis", ResponsesSettings(), **options)
        try:
            owner = owner_of(API_KEY)
            store.put(owner, response("r1", answer("m1")), [item("u1")])
            url = shared_redis().url
            dump = b" ".join(keys_of(store))
            for key in keys_of(store):
                kind = command(url, "TYPE", key)
                if kind == b"hash":
                    dump += b" ".join(x for pair in command(url, "HGETALL", key).items() for x in pair)
                elif kind == b"zset":
                    dump += b" ".join(command(url, "ZRANGE", key, 0, -1))
            for forbidden in (API_KEY, owner, hashlib.sha256(owner.encode()).hexdigest()[:32]):
                assert forbidden.encode() not in dump
            assert store.get(owner, "r1")["id"] == "r1"
        finally:
            store.close()


def test_an_unreachable_redis_is_a_503_within_the_command_timeout():
    settings = ResponsesSettings()
    cfg = build_config({}, {}, {"engine": "scripted", "store": f"redis://127.0.0.1:{free_port()}/0",
                                 "store_command_timeout": 0.3, "store_connect_timeout": 0.3})
    from tests.responses.store_backends import SyncStore
    import asyncio
    from maya_server.responses.store.opening import open_store

    store = SyncStore(open_store(cfg, settings), asyncio.new_event_loop())
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as caught:
            store.get("owner", "r1")
        elapsed = time.monotonic() - started
        assert caught.value.status == 503 and caught.value.body()["error"]["code"] == "store_unavailable"
        assert store.stats()["healthy"] is False
    finally:
        store.close()
    assert elapsed < 5  # a bound on hanging, not a speed target: the timeout is 0.3 s


def test_a_slow_redis_is_a_503_and_the_store_recovers_by_itself():
    store = open_sync_store("redis", ResponsesSettings(), store_command_timeout=0.3)
    url = shared_redis().url
    try:
        store.put("owner", response("r1", answer("m1")), [item("u1")])
        command(url, "CLIENT", "PAUSE", "1500", "ALL")  # Redis answers nobody for 1.5 s
        with pytest.raises(StoreUnavailableError):
            store.get("owner", "r1")
        deadline = time.monotonic() + 10
        while True:
            try:
                assert store.get("owner", "r1")["id"] == "r1"
                break
            except StoreUnavailableError:
                assert time.monotonic() < deadline, "the store did not reconnect"
                time.sleep(0.1)
        assert store.stats()["healthy"] is True
    finally:
        store.close()


def test_a_password_is_taken_from_a_file_and_never_shown(tmp_path, start_server):
    redis = RedisServer(password="pw-in-url-Zq9")
    try:
        password_file = tmp_path / "password"
        password_file.write_text("pw-in-url-Zq9\n")
        bare = f"redis://127.0.0.1:{redis.port}/0"
        with pytest.raises(ConfigError, match="one place"):
            from maya_server.responses.store.opening import open_store
            open_store(ServerConfig(engine="scripted", store=redis.url, store_password_file=str(password_file)),
                       ResponsesSettings())
        for options in ({"store": redis.url}, {"store": bare, "store_password_file": str(password_file)}):
            server = start_server(["ok"], **options)
            client = server.client()
            stored = client.responses.create(model="m", input="hi", store=True)
            assert client.responses.retrieve(stored.id).id == stored.id
            with server.http() as http:
                status = http.get("/v1/status").text
                metrics = http.get("/metrics/prometheus").text
            assert "pw-in-url-Zq9" not in status and "pw-in-url-Zq9" not in metrics
            assert f'"url":"redis://127.0.0.1:{redis.port}/0"' in status and '"backend":"redis"' in status
            assert "pw-in-url-Zq9" not in repr(server.config)
    finally:
        redis.stop()


@pytest.mark.parametrize("value, message", [
    ("postgres://db/1", "must be 'memory' or a redis://"),
    ("redis://", "names no host"),
    ("unix://", "names the socket's path"),
])
def test_a_bad_store_setting_is_a_config_error_naming_it(value, message):
    with pytest.raises(ConfigError, match=message) as caught:
        build_config({}, {"MAYA_STORE": value}, {"engine": "scripted"})
    assert caught.value.name == "store" if hasattr(caught.value, "name") else True


def test_the_shown_url_has_no_credentials():
    assert shown_url("redis://user:pw@redis.internal:6380/2") == "redis://redis.internal:6380/2"
    assert shown_url("rediss://:pw@h/0") == "rediss://h/0"
    assert shown_url("unix:///run/redis.sock?db=1") == "unix:///run/redis.sock?db=1"


def test_a_redis_at_maxmemory_is_a_503_and_nothing_is_half_written():
    redis = RedisServer()
    try:
        from tests.responses.store_backends import SyncStore
        import asyncio
        from maya_server.responses.store.opening import open_store

        cfg = ServerConfig(engine="scripted", store=redis.url)
        store = SyncStore(open_store(cfg, ResponsesSettings()), asyncio.new_event_loop())
        store.put("owner", response("r1", answer("m1")), [item("u1")])
        before = store.stats()
        command(redis.url, "CONFIG", "SET", "maxmemory", "1")
        with pytest.raises(StoreUnavailableError):
            store.put("owner", response("r2", answer("m2", "z" * 5000)), [item("u2")])
        command(redis.url, "CONFIG", "SET", "maxmemory", "0")
        after = store.stats()  # refused again after Maya evicted its least recently used entry (r1) to make room
        assert (before["entries"], after["entries"], after["bytes"], after["evictions"]) == (1, 0, 0, 1)
        with pytest.raises(NotFoundError):
            store.get("owner", "r2")
        store.put("owner", response("r2", answer("m2")), [item("u2")])
        assert store.get("owner", "r2")["id"] == "r2"
        store.close()
    finally:
        redis.stop()
