"""`--store`'s other half: where background tasks live, decided by the store that was opened.

This process's job table with the memory store; Redis, shared by the fleet, with a Redis store: the same server,
URL and password as the store (`store/opening.py`), on a pool of its own for the readers' blocking reads.
"""

from __future__ import annotations

import time
from typing import Callable

from ..settings import ResponsesSettings
from ..store.interface import ResponseStoreBackend
from ..store.opening import redis_pool
from .manager import JobManager


def open_jobs(config, settings: ResponsesSettings, store: ResponseStoreBackend, *,
              clock: Callable[[], float] | None = None, **options) -> JobManager:
    """Where background tasks live: this process with the memory store; Redis, shared by the fleet, with a Redis
    store (`jobs/redis.py`). Readers follow a task with blocking reads on their own pool, one connection per
    reader this replica admits, so a reader never waits for a connection nor holds one of the store's. `clock`:
    monotonic in memory, the wall clock shared by replicas on Redis (tests inject one)."""
    if store.backend != "redis":
        return JobManager(settings, clock=clock or time.monotonic, **options)
    from redis.asyncio import Redis

    from .event_log_redis import BLOCK_MS
    from .redis import RedisJobManager

    tail_pool = redis_pool(config, max_connections=settings.stream_readers,
                           socket_timeout=BLOCK_MS / 1000 + config.store_command_timeout, client_name="maya-tail")
    return RedisJobManager(settings, link=store.link, tail_client=Redis(connection_pool=tail_pool),
                           lease_s=config.job_lease_s, wall_clock=clock or time.time,
                           serves=(config.served_model_name, config.family), claim_wait_s=config.job_claim_wait_s,
                           resume_limit=config.job_resume_limit, shutdown_grace_s=config.job_shutdown_grace_s,
                           **options)
