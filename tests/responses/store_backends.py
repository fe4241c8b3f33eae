"""The response store's two backends behind one synchronous face, so one contract suite runs on both.

`memory` is `MemoryStore` (the default); `redis` is `RedisStore` on a real redis-server (`tests/redis_server.py`),
each test under its own key prefix. `SyncStore` runs the async interface on its own event loop, so the
contract tests read as plain calls; `stats()` reads the fleet's figures from Redis first.
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import itertools
import time
import uuid
from typing import Callable

import pytest

from maya_server.config import ServerConfig
from maya_server.responses.store import redis as store_redis
from maya_server.responses.settings import ResponsesSettings
from maya_server.responses.store.core import REFERENCE_BYTES
from maya_server.responses.store.opening import open_store

from tests.redis_server import RedisServer

BACKENDS = ("memory", "redis")
_servers: dict[str, RedisServer] = {}
_prefixes = itertools.count()


def shared_redis() -> RedisServer:
    """One redis-server for the whole test session (each test writes under its own prefix)."""
    if "shared" not in _servers:
        _servers["shared"] = RedisServer()
        atexit.register(stop_shared_redis)  # also when the session ends without pytest's finish hook
    return _servers["shared"]


def stop_shared_redis() -> None:
    server = _servers.pop("shared", None)
    if server is not None:
        server.stop()


def unique_prefix() -> str:
    return f"t{next(_prefixes)}-{uuid.uuid4().hex[:6]}:"


class SyncStore:
    """The async store, called synchronously on a private loop (never the loop of a running server)."""

    def __init__(self, store, loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self.loop = loop

    @property
    def backend(self) -> str:
        return self.store.backend

    @property
    def counters(self):
        return self.store.counters if self.backend == "redis" else self.store.core.counters

    def stats(self) -> dict:
        return self.loop.run_until_complete(self.store.fresh_stats())

    def __getattr__(self, name: str):
        attribute = getattr(self.store, name)
        if not inspect.iscoroutinefunction(attribute):
            return attribute

        def call(*args, **kwargs):
            return self.loop.run_until_complete(attribute(*args, **kwargs))

        return call

    def close(self) -> None:
        self.loop.run_until_complete(self.store.close())
        self.loop.close()


def open_sync_store(backend: str, settings: ResponsesSettings, clock: Callable[[], float] | None = None,
                    **config) -> SyncStore:
    if backend == "memory":
        cfg = ServerConfig(engine="scripted")
    else:
        cfg = ServerConfig(engine="scripted", store=shared_redis().url, store_prefix=unique_prefix(), **config)
    loop = asyncio.new_event_loop()
    return SyncStore(open_store(cfg, settings, clock=clock), loop)


def reference_bytes(store) -> int:
    """What one lineage slot counts for."""
    return REFERENCE_BYTES if store.backend == "memory" else store_redis.SLOT_BYTES


def response_overhead(store) -> int:
    """What a stored response of one block counts beyond its JSON: nothing in memory (but its 8-byte slot); on
    Redis, the keys that hold it (its entry, its lineage, the block's key)."""
    if store.backend == "memory":
        return REFERENCE_BYTES
    inner = store.store
    return store_redis.ENTRY_OVERHEAD + store_redis.LINEAGE_BYTES + inner.block_overhead + store_redis.SLOT_BYTES


def envelope_overhead(store) -> int:
    return 0 if store.backend == "memory" else store.store.block_overhead


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


def wall_clock() -> float:
    return time.time()


def store_stats(server) -> dict:
    """The server's store figures, read afresh (from Redis, on the server's loop, for a Redis store)."""
    return server.await_on_loop(server.app.state.store.fresh_stats)


def over_backends(start_server, backend: str):
    """`start_server` whose servers keep stored responses in `backend` (Redis: the shared test server, each
    server of the test under the test's own prefix unless it names one)."""
    if backend == "memory":
        return start_server
    url, prefix = shared_redis().url, unique_prefix()

    def start(*args, **config):
        config.setdefault("store", url)
        config.setdefault("store_prefix", prefix)
        return start_server(*args, **config)

    return start
