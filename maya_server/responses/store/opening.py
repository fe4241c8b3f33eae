"""`--store memory|redis://…`: the response store a server keeps its stored responses in.

`memory` (the default) is this process's memory. A `redis://`, `rediss://` (TLS) or `unix://` URL is a
Redis or Valkey server shared by every replica given the same URL and prefix. Its password comes from the
URL or from `--store-password-file`, never both; it is never shown: /v1/status and the metrics show the URL
without its credentials (`shown_url`, `util/store_url.py`, with the setting's check).
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

from ...errors import ConfigError
from ...util.store_url import SENTINEL_SCHEMES, sentinel_address, shown_url
from ..settings import ResponsesSettings
from .interface import ResponseStoreBackend
from .memory import MemoryStore


def read_secret(name: str, path: str | None) -> bytes | None:
    """A file's content, stripped of its line end (a password, the scope secret); None without a file."""
    if path is None:
        return None
    try:
        data = Path(path).read_bytes().strip()
    except OSError as exc:
        raise ConfigError(name, f"cannot read {path}: {exc.strerror}") from None
    if not data:
        raise ConfigError(name, f"{path} is empty")
    return data


def open_store(config, settings: ResponsesSettings, *, clock: Callable[[], float] | None = None) -> ResponseStoreBackend:
    """The store `config.store` names (nothing is connected yet: a Redis store connects on its first command)."""
    if config.store == "memory":
        return MemoryStore(settings, clock=clock or time.monotonic)
    from .redis_link import RedisLink
    from .redis import RedisStore

    link = RedisLink(_redis_client(config), prefix=config.store_prefix,
                     secret=read_secret("store_secret_file", config.store_secret_file),
                     command_timeout=config.store_command_timeout, shown_url=shown_url(config.store))
    link.require_noeviction = config.store_require_noeviction
    link.wait_replicas, link.wait_timeout = config.store_wait_replicas, config.store_wait_timeout
    return RedisStore(link, settings, clock=clock or time.time, block_cache_bytes=config.store_block_cache_bytes)


def _redis_client(config):
    """The store's client on its connection pool (nothing connected yet)."""
    from redis.asyncio import Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    pool = redis_pool(config, max_connections=config.store_pool_size, socket_timeout=config.store_command_timeout,
                      client_name="maya", retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)))
    # one retry on a broken connection: after Redis restarts, each pooled connection fails once on its next use;
    # the command timeout still bounds the whole call (`RedisStore._command`)
    return Redis(connection_pool=pool)


def redis_pool(config, *, max_connections: int, socket_timeout: float, client_name: str, **options):
    """A blocking pool of connections to the store's primary: the URL's node, or the primary the sentinels of a
    `redis+sentinel://` URL name (found again whenever a connection is opened, and after a failover: a connection
    that meets a replica is dropped). Waiting for a free connection is bounded by the command timeout."""
    from redis.asyncio import BlockingConnectionPool

    common = dict(max_connections=max_connections, timeout=config.store_command_timeout,
                  socket_connect_timeout=config.store_connect_timeout, socket_timeout=socket_timeout,
                  client_name=client_name, **options)
    if config.store.partition("://")[0] not in SENTINEL_SCHEMES:
        return BlockingConnectionPool.from_url(config.store, **common, **password_option(config))
    from redis.asyncio.sentinel import Sentinel

    address = sentinel_address(config.store)
    sentinels = Sentinel(list(address.sentinels), socket_timeout=config.store_command_timeout,
                         socket_connect_timeout=config.store_connect_timeout)
    credentials = {"username": address.username} if address.username else {}
    if address.password is not None:
        credentials["password"] = address.password
    return _sentinel_pool_class()(address.service, sentinels, db=address.db, ssl=address.tls, **common,
                                  **credentials, **password_option(config))


@functools.cache
def _sentinel_pool_class() -> type:
    """redis-py's Sentinel pool with the blocking pool's wait for a free connection (its own raises at once)."""
    from redis.asyncio import BlockingConnectionPool
    from redis.asyncio.sentinel import SentinelConnectionPool

    class SentinelBlockingPool(SentinelConnectionPool, BlockingConnectionPool):
        pass

    return SentinelBlockingPool


def check_eviction_policy(config) -> None:
    """`--store-require-noeviction`, at start-up: a ConfigError (exit 2) naming the fix when Redis may evict
    Maya's keys, or when Maya cannot tell (Redis unreachable, or `CONFIG GET` refused): the flag promises that a
    running Maya saw a policy that keeps its keys. Without the flag, or with the memory store, nothing."""
    if config.store == "memory" or not config.store_require_noeviction:
        return
    import asyncio

    from redis.exceptions import RedisError

    from .redis_config import evicts_maya_keys, policy_problem, read_config

    async def read() -> dict | None:
        client = _redis_client(config)
        try:
            bound = config.store_connect_timeout + config.store_command_timeout
            return await asyncio.wait_for(read_config(client), bound)
        finally:
            await client.aclose()
            await client.connection_pool.disconnect()

    name, where = "store_require_noeviction", shown_url(config.store)
    try:
        got = asyncio.run(read())
    except (RedisError, OSError, asyncio.TimeoutError) as error:
        raise ConfigError(name, f"cannot read the maxmemory-policy of Redis at {where} ({type(error).__name__}); "
                                "start Redis first, or leave out --store-require-noeviction") from None
    if got is None:
        raise ConfigError(name, f"Redis at {where} refuses CONFIG GET, so Maya cannot check its maxmemory-policy; "
                                "allow the ACL user +config|get, or leave out --store-require-noeviction")
    if evicts_maya_keys(got["policy"]):
        raise ConfigError(name, f"{policy_problem(got['policy'])} (Redis at {where}); or leave out "
                                "--store-require-noeviction")


def _url_password(url: str) -> str | None:
    if url.partition("://")[0] in SENTINEL_SCHEMES:
        return sentinel_address(url).password
    return urlsplit(url).password


def password_option(config) -> dict:
    """The store password as redis-py takes it, from `--store-password-file` (the jobs' reader pool uses it too)."""
    password = read_secret("store_password_file", config.store_password_file)
    if password is not None and _url_password(config.store) is not None:
        raise ConfigError("store_password_file", "the store URL already has a password: give it in one place")
    return {"password": password.decode()} if password is not None else {}
