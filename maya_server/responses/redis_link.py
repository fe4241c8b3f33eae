"""One Redis as Maya's Responses service uses it: the shared response store and the background tasks' records.

Every command goes through `RedisLink.command`: it must answer within `--store-command-timeout` (waiting for a
pooled connection included), else the request gets a 503 `store_unavailable`; its latency, failures and the
link's health are counted for /v1/status and the metrics. The pool reconnects by itself: a later command
simply gets a fresh connection.

Owner scopes: keys in Redis hold `HMAC-SHA256(secret, owner)` (`owner` is already a hash of the API key,
`http/auth.py`), never the credential. The secret is `--store-secret-file`'s content, the same on every
replica, so a copy of Redis alone (a dump, a replica) cannot be used to test guessed keys. Without that
file the secret is a random salt kept in Redis (`<prefix>salt`, set once by whichever replica comes first):
each deployment's scopes are then its own, but someone who can read Redis can also test keys against them.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from redis import exceptions as redis_errors

from ..errors import StoreUnavailableError

UNAVAILABLE = (redis_errors.ConnectionError, redis_errors.TimeoutError, redis_errors.BusyLoadingError,
               redis_errors.ReadOnlyError, redis_errors.OutOfMemoryError, OSError, asyncio.TimeoutError)
"""What makes the store unavailable rather than Maya wrong: no connection, no answer in time, a Redis still
loading its data, a read-only replica, or a Redis at its `maxmemory` (which refuses a script before it
writes anything). Any other Redis error is a bug and a 500."""
SCOPE_HEX = 32

log = logging.getLogger("maya.store")


@dataclass
class LinkFigures:
    commands: int = 0
    command_seconds: float = 0.0
    command_errors: int = 0
    healthy: bool = True
    """Whether the last command answered."""


class RedisLink:
    def __init__(self, client: Any, *, prefix: str, secret: bytes | None, command_timeout: float,
                 shown_url: str) -> None:
        self.client = client
        self.prefix = prefix
        self.command_timeout = command_timeout
        self.shown_url = shown_url
        self.figures = LinkFigures()
        self._secret = secret

    def script(self, source: str) -> Callable[[list], Awaitable[Any]]:
        """A Lua script (EVALSHA, loaded again by itself after a Redis restart), run as one command."""
        registered = self.client.register_script(source)
        return lambda args: self.command(lambda: registered(keys=[], args=args))

    async def command(self, call: Callable[[], Awaitable[Any]], *, timeout: float | None = None) -> Any:
        """One round trip within the command timeout (`timeout` for a blocking read); a connection or timeout
        failure is a 503."""
        started = time.perf_counter()
        f = self.figures
        try:
            result = await asyncio.wait_for(call(), timeout or self.command_timeout)
        except redis_errors.OutOfMemoryError:
            f.command_errors += 1
            raise StoreUnavailableError(
                "The response store (Redis) is full (at its maxmemory) and refused the write; retry shortly, or send "
                "the history with store:false.", reason="oom",
            ) from None
        except UNAVAILABLE:
            f.command_errors += 1
            f.healthy = False
            raise StoreUnavailableError(
                "The response store (Redis) is unavailable; retry shortly, or send the history with store:false."
            ) from None
        finally:
            f.commands += 1
            f.command_seconds += time.perf_counter() - started
        f.healthy = True
        return result

    async def ping(self) -> None:
        await self.command(self.client.ping)

    async def scope(self, owner: str) -> str:
        """The owner's scope as keys in Redis hold it."""
        if self._secret is None:
            self._secret = await self._salt()
        return hmac.new(self._secret, owner.encode(), hashlib.sha256).hexdigest()[:SCOPE_HEX]

    async def _salt(self) -> bytes:
        key = self.prefix + "salt"
        await self.command(lambda: self.client.set(key, secrets.token_hex(32), nx=True))
        return await self.command(lambda: self.client.get(key))

    async def close(self) -> None:
        await self.client.aclose()
        await self.client.connection_pool.disconnect()  # a pool given to the client is not closed with it


async def every(interval_s: float, step: Callable[[], Awaitable[Any]], what: str) -> None:
    """Run `step` every `interval_s` until cancelled: a Redis that does not answer is counted by the link and
    tried again next time; any other error is logged (no detail: it could quote a request) and never ends the
    loop, since these loops are what notice recovery and keep leases alive."""
    while True:
        try:
            await step()
        except StoreUnavailableError:
            pass
        except Exception as error:
            log.error("%s failed: %s", what, type(error).__name__)
        await asyncio.sleep(interval_s)
