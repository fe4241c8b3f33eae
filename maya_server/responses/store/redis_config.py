"""What Redis will do with Maya's keys: its `maxmemory` and `maxmemory-policy`, read with `CONFIG GET`.

Why Maya looks: of the keys it writes, only a stored response's data keys (its entry, lineage and blocks,
`redis_lua.py`) and the engine replicas' affinity hints carry a TTL; the store's bookkeeping (counts, indexes,
figures), the task records and the scope salt carry none (entries expire by Maya's own clock, checked by its
scripts). So:

- an `allkeys-*` policy lets Redis evict any of them at `maxmemory`: a stored response, a part of one, a task's
  record, a count the store then cannot trust until it recounts. A WARNING naming the fix, and fatal at start-up
  with `--store-require-noeviction`;
- a `volatile-*` policy evicts only keys with a TTL: stored responses' data keys (a response that needs an evicted
  one is a 404 `stored_response_lost`, nothing else is touched) and affinity hints; at `maxmemory` with nothing
  volatile to evict Redis refuses writes as `noeviction` does (a 503, reason `oom`, after Maya's own eviction).
  Not a warning: what it costs is what a full store costs, bounded to the responses Redis chose;
- Maya's byte limit (`MAYA_GLM_RESPONSES_CACHE_BYTES`) above `maxmemory` (not 0) means Redis fills before Maya's own
  LRU eviction starts: a WARNING too.

Where `CONFIG GET` is refused (managed Redis, an ACL user without `+config|get`, a renamed command), Maya says
so once and goes on: it cannot know, and that is all it can say.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

EVICTING_PREFIX = "allkeys-"
POLICY_FIX = ("run `CONFIG SET maxmemory-policy noeviction` on Redis and put `maxmemory-policy noeviction` in its "
              "redis.conf")
UNREADABLE = "config_unreadable"
EVICTING = "evicting_policy"
BYTES_OVER = "bytes_over_maxmemory"
KINDS = (EVICTING, BYTES_OVER, UNREADABLE)
"""Every warning kind, so the metric shows 0 for the ones that do not hold."""


def evicts_maya_keys(policy: str | None) -> bool:
    """Whether Redis may evict any key Maya owns under `policy` (under `volatile-*`, only the data keys of stored
    responses and affinity hints, which carry a TTL)."""
    return policy is not None and policy.startswith(EVICTING_PREFIX)


def policy_problem(policy: str) -> str:
    return (f"Redis evicts any key at its maxmemory (maxmemory-policy {policy}), so it can drop stored responses "
            f"and background tasks Maya still counts on; {POLICY_FIX}")


def refused(error: BaseException) -> bool:
    """A `CONFIG GET` Redis will not run for this connection: an ACL without `+config|get` (NOPERM), or the
    command renamed away (managed Redis: `unknown command`)."""
    from redis import exceptions as redis_errors

    if isinstance(error, redis_errors.NoPermissionError):
        return True
    return isinstance(error, redis_errors.ResponseError) and "unknown command" in str(error).lower()


async def read_config(client: Any) -> dict | None:
    """`maxmemory` (bytes) and `maxmemory-policy`, or None where Redis refuses `CONFIG GET`."""
    from redis import exceptions as redis_errors

    try:
        got = await client.config_get("maxmemory", "maxmemory-policy")
    except redis_errors.ResponseError as error:
        if refused(error):
            return None
        raise
    return {"maxmemory": int(got.get("maxmemory", 0)), "policy": got.get("maxmemory-policy")}


@dataclass
class RedisConfigView:
    """Redis's configuration as this replica last read it and the warnings it gives. `readable` is None until
    the first read."""

    readable: bool | None = None
    maxmemory: int | None = None
    policy: str | None = None
    warnings: dict[str, str] = field(default_factory=dict)
    """kind → message, for each warning that holds now."""

    def update(self, got: dict | None, cache_bytes: int) -> tuple[dict[str, str], list[str]]:
        """Take a read (None: refused); (warnings that appeared, kinds that went away), to log each once."""
        self.readable = got is not None
        warnings: dict[str, str] = {}
        if got is None:
            warnings[UNREADABLE] = ("Redis refused CONFIG GET (an ACL without +config|get, or a managed Redis): Maya "
                                    "cannot check maxmemory-policy; make sure it is noeviction")
        else:
            self.maxmemory, self.policy = got["maxmemory"], got["policy"]
            if evicts_maya_keys(self.policy):
                warnings[EVICTING] = policy_problem(self.policy)
            if self.maxmemory and cache_bytes > self.maxmemory:
                warnings[BYTES_OVER] = (
                    f"Maya's byte limit (MAYA_GLM_RESPONSES_CACHE_BYTES, {cache_bytes}) is above Redis's maxmemory "
                    f"({self.maxmemory}): Redis fills before Maya evicts its own least recently used responses; "
                    "lower the limit or raise maxmemory")
        appeared = {kind: text for kind, text in warnings.items() if kind not in self.warnings}
        gone = [kind for kind in self.warnings if kind not in warnings]
        self.warnings = warnings
        return appeared, gone

    def report(self) -> dict:
        return {"config_readable": self.readable, "maxmemory": self.maxmemory, "policy": self.policy,
                "warnings": [{"kind": kind, "message": text} for kind, text in self.warnings.items()]}
