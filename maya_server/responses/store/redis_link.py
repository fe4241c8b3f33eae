"""One Redis as Maya's Responses service uses it: the shared response store and the background tasks' records.

Every command goes through `RedisLink.command`: it must answer within `--store-command-timeout` (waiting for a
pooled connection included), else the request gets a 503 `store_unavailable`; its latency, failures and the
link's health are counted for /v1/status and the metrics. The pool reconnects by itself: a later command
simply gets a fresh connection.

Refusals. Redis can answer and still refuse: an ACL without a permission (`NOPERM`), a failed background save
(`MISCONF`), a script past `busy-reply-threshold` (`BUSY`), too few replicas for `min-replicas-to-write`
(`NOREPLICAS`), a read-only replica (`READONLY`), a data set still loading (`LOADING`), a replica without its
primary (`MASTERDOWN`), `maxmemory` (`OOM`). Each is a 503 `store_unavailable` whose message names the cause,
with `reason` the code in lower case (`REFUSALS`); inside a Lua script Redis 7 keeps the code at the start of
the message, and redis-py gives it as `status_code`. Any other Redis error is a bug and a 500. A refusal other
than `oom` stands until a write gets through again (the watch's write check, or `ping`): meanwhile the link is
not healthy, so a `store:true` request is refused before it is generated. `oom` is left to the store (each
write tries again; the store may free room by its own eviction).

Owner scopes: keys in Redis hold `HMAC-SHA256(secret, owner)` (`owner` is already a hash of the API key,
`http/auth.py`), never the credential. The secret is `--store-secret-file`'s content, the same on every
replica, so a copy of Redis alone (a dump, a replica) cannot be used to test guessed keys. Without that
file the secret is a random salt kept in Redis (`<prefix>salt`, set once by whichever replica comes first):
each deployment's scopes are then its own, but someone who can read Redis can also test keys against them.
That salt lives only in Redis, so the replicas follow it (`follow_salt`): each watch interval and on a read
that found nothing, a replica reads the key again; a changed salt (Redis flushed or restarted empty, and
another replica wrote a new one) is adopted, and a vanished one is written back with this replica's own
(`SET NX`: where only the salt key was lost, what was stored stays reachable). The fleet agrees again within
one interval. With a secret file none of this happens: the secret is fixed.

The watch (`start`): every interval the salt, Redis's memory configuration (`redis_config.py`) and one small
write (which tells whether a refusal still stands).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Literal

from redis import exceptions as redis_errors

from ...errors import StoreUnavailableError
from .redis_config import RedisConfigView, read_config

UNREACHABLE = (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError, asyncio.TimeoutError)
"""What makes the store unreachable rather than Maya wrong: no connection, no answer in time."""
RETRY = "retry shortly, or send the history with store:false"
REFUSALS = {
    "oom": ("The response store (Redis) is full (at its maxmemory) and refused the write; retry shortly, or send "
            "the history with store:false."),
    "noperm": ("The response store (Redis) refused the command: the ACL user Maya connects as lacks a permission "
               f"Maya needs (NOPERM); grant it, then {RETRY}."),
    "misconf": ("The response store (Redis) refuses writes because it cannot save to disk (MISCONF: its last "
                "background save failed and stop-writes-on-bgsave-error is on); fix Redis's persistence, then "
                f"{RETRY}."),
    "busy": ("The response store (Redis) is busy running a script past its busy-reply-threshold (BUSY); "
             f"{RETRY}."),
    "noreplicas": ("The response store (Redis) refuses writes: fewer replicas are connected than its "
                   f"min-replicas-to-write asks (NOREPLICAS); {RETRY}."),
    "readonly": ("The response store (Redis) answered as a read-only replica (READONLY): its primary moved (a "
                 "failover), and Maya reconnects to find it; if --store names a replica, point it at the primary. "
                 f"Then {RETRY}."),
    "loading": f"The response store (Redis) is still loading its data set into memory (LOADING); {RETRY}.",
    "masterdown": ("The response store (Redis) is a replica that lost its primary (MASTERDOWN); "
                   f"{RETRY}."),
    "cluster": ("The response store (Redis) is a node of a Redis Cluster (it answered MOVED, CLUSTERDOWN or a "
                "cross-slot refusal), which Maya does not support yet: point --store at a standalone primary, or at "
                "the sentinels of one (redis+sentinel://)."),
}
"""Each refusal Redis can answer with (its code, lower case) and the message the client gets."""
MOVED_PRIMARY = ("readonly", "masterdown")
"""Refusals of a node that is a replica now: the primary moved (a failover), so the connections to it are dropped
and the next command looks for the primary again through a new one (`RedisLink._leave_moved_primary`)."""
UNAVAILABLE_MESSAGE = f"The response store (Redis) is unavailable; {RETRY}."
NOT_REPLICATED = ("The response store (Redis) wrote this on its primary, but only {confirmed} of the {wanted} replicas "
                  "--store-wait-replicas asks for confirmed it within {ms} ms: it may be lost if the primary fails "
                  "now. " + RETRY[0].upper() + RETRY[1:] + ".")
SCOPE_HEX = 32
WRITE_CHECK = "redis.call('SET', ARGV[1], ARGV[2]) return 1"
"""The watch's write: a script, so it needs what the store's scripts need (EVALSHA and a write)."""

log = logging.getLogger("maya.store")


SCRIPT_ACL_REFUSAL = "The user executing the script can't"
"""How Redis 7 words an ACL refusal met inside a script (a key outside the user's patterns, or a command the user
may not run): no NOPERM code in front, so it is recognised by its words."""


class ScopedOwner(str):
    """An owner known only by its scope: a background task taken over from another replica, whose record keeps
    the scope, never the owner (whose hash a copy of Redis could test keys against)."""


CLUSTER_ERRORS = (redis_errors.MovedError, redis_errors.AskError, redis_errors.ClusterDownError,
                  redis_errors.TryAgainError, redis_errors.ClusterCrossSlotError)
"""What a Redis Cluster node answers a client that treats it as a standalone primary (redis-py strips their codes)."""
CLUSTER_SCRIPT_REFUSAL = "non local key in a cluster node"
"""How a cluster node refuses a script that reaches a key of another node's slot."""


def refusal_of(error: BaseException) -> str | None:
    """The refusal `error` is (a key of `REFUSALS`), or None."""
    if str(error).startswith(SCRIPT_ACL_REFUSAL):
        return "noperm"
    code = getattr(error, "status_code", None) or str(error).split(" ", 1)[0]
    reason = code.lower() if isinstance(code, str) else ""
    if reason in REFUSALS:
        return reason
    if isinstance(error, redis_errors.MasterDownError):  # redis-py files it under ClusterDownError
        return "masterdown"
    if isinstance(error, CLUSTER_ERRORS) or CLUSTER_SCRIPT_REFUSAL in str(error):
        return "cluster"
    return None


@dataclass
class LinkFigures:
    commands: int = 0
    command_seconds: float = 0.0
    command_errors: int = 0
    healthy: bool = True
    """Whether the last command answered, and no refusal stands."""
    refusal: str | None = None
    """The refusal that stands (not `oom`): set by a refused command, cleared by a write that gets through."""
    refusals: int = 0
    primary_moves: int = 0
    """Times a node answered as a replica (`MOVED_PRIMARY`) and its pooled connections were dropped."""
    unreplicated: int = 0
    """Acknowledged writes that fewer than `wait_replicas` replicas confirmed in time (each a 503)."""
    salt_changes: int = 0
    """Times this replica adopted a salt another replica wrote (Redis flushed or restarted empty)."""
    salt_restores: int = 0
    """Times this replica found the salt gone and wrote its own back."""


class RedisLink:
    def __init__(self, client: Any, *, prefix: str, secret: bytes | None, command_timeout: float,
                 shown_url: str) -> None:
        self.client = client
        self.prefix = prefix
        self.command_timeout = command_timeout
        self.shown_url = shown_url
        self.figures = LinkFigures()
        self.config = RedisConfigView()
        self.require_noeviction = False
        """Set by `open_store` from `--store-require-noeviction`: an evicting policy found later is an error."""
        self._fixed = secret is not None
        self._secret = secret
        self.wait_replicas = 0
        """`--store-wait-replicas`: replicas that must confirm each acknowledged write (`durable` scripts)."""
        self.wait_timeout = 0.0
        self._write_check = self.script(WRITE_CHECK)
        self._watch: asyncio.Task | None = None

    def script(self, source: str, *, durable: Literal["answer", "note"] | None = None) -> Callable[[list], Awaitable[Any]]:
        """A Lua script (EVALSHA, loaded again by itself after a Redis restart or on a new primary), run as one
        command. `durable`: a write others are told is done, which with `wait_replicas` waits until that many
        replicas have it (`_replicated`): `answer`, a request waits for it (a stored response, a task's
        admission), so fewer replicas in time is its 503; `note`, nobody waits (a task's end, which its readers
        see at once), so fewer is counted and logged, never retried (the write is in, on the primary)."""
        registered = self.client.register_script(source)
        if durable is not None:
            return lambda args: self._durable(registered, args, durable == "answer")
        return lambda args: self.command(lambda: registered(keys=[], args=args))

    async def _durable(self, registered: Any, args: list, answers: bool) -> Any:
        if not self.wait_replicas:
            return await self.command(lambda: registered(keys=[], args=args))
        result, confirmed = await self.command(lambda: self._replicated(registered, args),
                                               timeout=self.command_timeout + self.wait_timeout)
        if confirmed < self.wait_replicas:
            self.figures.unreplicated += 1
            message = NOT_REPLICATED.format(confirmed=confirmed, wanted=self.wait_replicas,
                                            ms=round(self.wait_timeout * 1000))
            if answers:
                raise StoreUnavailableError(message, reason="not_replicated")
            log.warning("a background response's end is on the Redis primary only: %s", message.split(": ")[0])
        return result

    async def _replicated(self, registered: Any, args: list) -> tuple[Any, int]:
        """The script, then `WAIT` on the same connection (a pipeline: WAIT counts the replicas that have this
        connection's writes, and cannot run inside a script): (its answer, the replicas that confirmed)."""
        async with self.client.pipeline(transaction=False) as pipe:
            await registered(keys=[], args=args, client=pipe)
            pipe.execute_command("WAIT", self.wait_replicas, round(self.wait_timeout * 1000))
            result, confirmed = await pipe.execute()
        return result, int(confirmed)

    async def command(self, call: Callable[[], Awaitable[Any]], *, timeout: float | None = None) -> Any:
        """One round trip within the command timeout (`timeout` for a blocking read); a connection or timeout
        failure, or a refusal, is a 503."""
        started = time.perf_counter()
        f = self.figures
        try:
            result = await asyncio.wait_for(call(), timeout or self.command_timeout)
        except redis_errors.RedisError as error:
            reason = refusal_of(error)
            if reason in MOVED_PRIMARY:
                await self._leave_moved_primary()
            if reason is not None:
                raise self._refused(reason) from None
            if isinstance(error, UNREACHABLE):
                raise self._unreachable() from None
            raise
        except UNREACHABLE:
            raise self._unreachable() from None
        finally:
            f.commands += 1
            f.command_seconds += time.perf_counter() - started
        f.healthy = f.refusal is None
        return result

    async def _leave_moved_primary(self) -> None:
        """The node answered as a replica (READONLY): the primary moved (a failover behind a managed endpoint, or a
        DNS flip). The pooled connections to that node are dropped, so the next command opens a new one and finds
        the new primary, where the scripts load again by themselves (NOSCRIPT); a connection kept would answer
        READONLY until Maya restarted."""
        self.figures.primary_moves += 1
        await self.client.connection_pool.disconnect(inuse_connections=False)

    def _unreachable(self) -> StoreUnavailableError:
        self.figures.command_errors += 1
        self.figures.healthy = False
        return StoreUnavailableError(UNAVAILABLE_MESSAGE)

    def _refused(self, reason: str) -> StoreUnavailableError:
        f = self.figures
        f.command_errors += 1
        f.refusals += 1
        if reason != "oom":  # a full Redis is the store's to handle (its own eviction): no standing refusal
            if f.refusal != reason:
                log.warning("the response store (Redis) refuses commands: %s. %s", reason.upper(), REFUSALS[reason])
            f.refusal = reason
            f.healthy = False
        return StoreUnavailableError(REFUSALS[reason], reason=reason)

    def unavailable(self, message: str = UNAVAILABLE_MESSAGE) -> StoreUnavailableError:
        """The error that says why the store cannot be used now: the standing refusal's, else `message`."""
        reason = self.figures.refusal
        return StoreUnavailableError(REFUSALS[reason], reason=reason) if reason else StoreUnavailableError(message)

    async def ping(self) -> None:
        """Whether the store can be used now: while a refusal stands, the write check (a PING answers through
        some refusals, NOREPLICAS and NOPERM on scripts among them); else one PING."""
        if self.figures.refusal is not None:
            await self.check_writes()
        else:
            await self.command(self.client.ping)

    async def check_writes(self) -> None:
        """One small write; through: a standing refusal is over. Full (`oom`) says nothing about the others."""
        f = self.figures
        try:
            await self._write_check([self.prefix + "alive", int(time.time())])
        except StoreUnavailableError as error:
            if error.reason != "oom":
                raise
        if f.refusal is not None:
            log.warning("the response store (Redis) accepts writes again (it refused: %s)", f.refusal.upper())
            f.refusal = None
        f.healthy = True

    # -- owner scopes -------------------------------------------------------------------
    async def scope(self, owner: str) -> str:
        """The owner's scope as keys in Redis hold it (a `ScopedOwner` is one already)."""
        if isinstance(owner, ScopedOwner):
            return str(owner)
        if self._secret is None:
            self._secret = await self._read_salt()
        return hmac.new(self._secret, owner.encode(), hashlib.sha256).hexdigest()[:SCOPE_HEX]

    async def _read_salt(self) -> bytes:
        """The salt in Redis; where there is none, this replica's (a fresh one at first) written with SET NX,
        or whatever another replica wrote first."""
        key = self.prefix + "salt"
        current = await self.command(lambda: self.client.get(key))
        if current is not None:
            return current
        own = self._secret or secrets.token_hex(32).encode()
        earlier = await self.command(lambda: self.client.set(key, own, nx=True, get=True))
        if earlier is None and self._secret is not None:
            self.figures.salt_restores += 1
            log.warning("the scope salt was gone from Redis (flushed, restarted empty, or evicted); this replica "
                        "wrote its own back")
        return earlier if earlier is not None else own

    async def follow_salt(self) -> bool:
        """Read the salt again; adopt the fleet's where it changed. True when it did (a read by id that found
        nothing is then worth one retry). A fixed secret: nothing to follow."""
        if self._fixed or self._secret is None:
            return False
        current = await self._read_salt()
        if current == self._secret:
            return False
        self._secret = current
        self.figures.salt_changes += 1
        log.warning("the scope salt in Redis changed (Redis flushed or restarted empty, and another replica wrote "
                    "a new one); this replica follows it: responses stored under the old one are unreachable")
        return True

    # -- the watch ------------------------------------------------------------------------
    def start(self, interval_s: float, cache_bytes: int) -> None:
        """Every `interval_s`: follow the salt, read Redis's memory configuration, check that writes get
        through. Stopped by `close`."""
        self._watch = asyncio.ensure_future(every(interval_s, lambda: self.watch(cache_bytes), "Redis watch"))

    async def watch(self, cache_bytes: int) -> None:
        await self.follow_salt()
        appeared, gone = self.config.update(await self.command(lambda: read_config(self.client)), cache_bytes)
        for kind, text in appeared.items():
            if kind == "evicting_policy" and self.require_noeviction:
                log.error("%s (--store-require-noeviction is set; it was checked at start-up)", text)
            else:
                log.warning("%s", text)
        for kind in gone:
            log.info("Redis configuration warning resolved: %s", kind)
        await self.check_writes()

    def report(self) -> dict:
        """/v1/status's `redis` section of the store: what Redis's configuration and answers say."""
        f = self.figures
        return {**self.config.report(), "refusal": f.refusal, "refusals": f.refusals, "primary_moves": f.primary_moves,
                "wait_replicas": self.wait_replicas, "unreplicated": f.unreplicated,
                "salt": "secret_file" if self._fixed else "redis", "salt_changes": f.salt_changes,
                "salt_restores": f.salt_restores}

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
        await self.client.aclose()
        await self.client.connection_pool.disconnect()  # a pool given to the client is not closed with it


async def every(interval_s: float, step: Callable[[], Awaitable[Any]], what: str) -> None:
    """Run `step` every `interval_s` until cancelled: a Redis that does not answer, or refuses, is counted by
    the link and tried again next time; any other error is logged (no detail: it could quote a request) and
    never ends the loop, since these loops are what notice recovery and keep leases alive."""
    while True:
        try:
            await step()
        except StoreUnavailableError:
            pass
        except Exception as error:
            log.error("%s failed: %s", what, type(error).__name__)
        await asyncio.sleep(interval_s)
