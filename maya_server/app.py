"""The application factory: `create_app(config, engine)` builds one independent server.

No global state: every app has its own metrics registry, engine queue and
services, so tests (and embedders) can build as many as they like.
"""

from __future__ import annotations

import time
from contextlib import asynccontextmanager, suppress
from dataclasses import fields
from typing import Callable

from fastapi import FastAPI
from starlette.middleware import Middleware

from . import __version__
from .chat.request import ChatRequest
from .chat.routes import chat_router
from .config import ServerConfig
from .errors import JobCleanupError, NotFoundError
from .families import get_family
from .engine.base import Engine
from .engine.fifo import EngineQueue
from .engine.replicas.shared_affinity import SharedAffinity
from .engine_setup import with_served_model
from .pipeline.generation import GenerationService
from .pipeline.cache_scope import isolates
from .pipeline.prepare_lanes import PrepareLanes, PrepareLanesCollector
from .pipeline.spellings import SpellingMemory, SpellingMemoryCollector
from .images.encoder import bound_for, read_projector
from .images.limits import ImageLimits
from .images.loader import ImageLoader
from .http.auth import ApiKeyMiddleware
from .http.body import BodyLimits
from .http.cors import JsonErrorCORSMiddleware
from .http.errors import install_error_handlers
from .http.guard import RequestGuard
from .http.docs_page import install_docs
from .http.openapi import DOCS_URL, OPENAPI_URL, install_openapi
from .http.shutdown import Shutdown, ShutdownGate
from .http.status import status_router
from .http.websocket import WebSocketRefusal
from .metrics import Metrics
from .http.request_metrics import RequestMetricsMiddleware
from .mcp.settings import McpSettings
from .mcp.hub import McpCollector, McpHub
from .mcp.routes import mcp_router
from .responses.endpoints.records import ResponseRecords
from .responses.background.resumable import Resumer
from .responses.request.request import ResponsesRequest
from .responses.endpoints.resources import resources_router
from .responses.endpoints.routes import responses_router
from .responses.settings import ResponsesSettings
from .responses.jobs.opening import open_jobs
from .responses.store.opening import open_store
from .responses.metrics import JobCollector, StoreCollector
from .responses.jobs.manager import JobManager
from .responses.store.redis_affinity import RedisAffinity


def create_app(config: ServerConfig, engine: Engine, *, clock: Callable[[], float] | None = None,
               template_check: dict | None = None) -> FastAPI:
    """`clock` drives the response store's TTL (tests inject one; None: each store's own, monotonic in memory and
    the wall clock shared by replicas on Redis). A bad Responses setting in `config.environ` raises `ConfigError`.
    `template_check` is what the start-up check of the chat template found (`engine_setup.check_chat_template`),
    shown in /v1/status."""
    config = with_served_model(config, engine)  # an upstream's own model name, not its tokenizer folder's
    settings = ResponsesSettings.from_environ(config.environ)
    store = open_store(config, settings, clock=clock)

    async def unsave(job) -> None:
        with suppress(NotFoundError):
            await store.delete(job.owner, job.id)

    jobs = open_jobs(config, settings, store, clock=clock, on_failure_saved=unsave,
                     keepalive_s=config.keepalive_s)
    shared = share_affinity(config, engine, store)
    metrics = Metrics()
    metrics.registry.register(StoreCollector(store))
    metrics.registry.register(JobCollector(jobs))
    queue = EngineQueue(
        engine.slots,
        config.max_queue,
        on_wait=metrics.queue_wait_seconds.observe,
        on_reject=metrics.queue_rejections.inc,
    )
    metrics.queue_waiting.set_function(lambda: queue.waiting)
    metrics.slots_busy.set_function(lambda: queue.busy)
    metrics.slots_total.set(engine.slots)
    for collector in engine.metric_collectors():
        metrics.registry.register(collector)
    images = ImageLoader(image_limits(config), metrics)
    metrics.image_memory_bytes.set_function(lambda: images.memory.in_use)
    metrics.image_memory_limit_bytes.set(images.memory.limit)
    spellings = SpellingMemory(config.spelling_memory_mib << 20) if config.spelling_memory_mib else None
    if spellings is not None:
        metrics.registry.register(SpellingMemoryCollector(spellings))
    lanes = PrepareLanes(config.prepare_threads, max_waiting=config.max_queue)
    metrics.registry.register(PrepareLanesCollector(lanes))
    service = GenerationService(engine, get_family(config.family), queue, metrics, images, spellings,
                                isolate_caches=isolates(config.prompt_cache_isolation, config.api_keys), lanes=lanes,
                                constrain=config.constrained_decoding)
    hub = McpHub(config.mcp_servers, mcp_settings(config))
    metrics.registry.register(McpCollector(hub))

    shutdown = Shutdown()

    async def drain() -> None:
        """Run by `GracefulServer` before uvicorn closes connections: streams end, jobs are cancelled."""
        shutdown.begin()
        with suppress(JobCleanupError):  # reported by the lifespan's own shutdown below, which runs next
            await jobs.shutdown()

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        await store.start()
        await jobs.start()
        await hub.start()
        engine.begin_serving()
        try:
            yield {"shutdown": shutdown}  # Starlette copies lifespan state into every request's scope
        finally:
            shutdown.begin()
            await engine.close()  # its watching stops; its streams end with the jobs below
            await hub.stop()  # stops every MCP server process and session, even if the jobs fail to stop
            try:
                await jobs.shutdown()  # raises JobCleanupError if the engine did not release in time
            finally:
                images.close()
                lanes.close()
                if shared is not None:
                    engine.share_affinity(None)
                    await shared.close()
                await jobs.close()
                await store.close()

    app = FastAPI(title="Maya", version=__version__, docs_url=None, redoc_url=None, openapi_url=OPENAPI_URL,
                  lifespan=lifespan, middleware=middleware(config, shutdown, metrics))
    app.state.drain = drain
    app.state.service = service
    app.state.store = store
    app.state.jobs = jobs
    install_error_handlers(app)
    limits = BodyLimits(config.max_body_bytes, config.max_json_depth, lanes)
    install_openapi(app, {("/v1/responses", "post"): ResponsesRequest, ("/v1/chat/completions", "post"): ChatRequest})
    install_docs(app, docs_url=DOCS_URL, openapi_url=OPENAPI_URL)
    app.include_router(chat_router(service, config.served_model_name, limits, hub,
                                   mcp_max_rounds=config.mcp_max_rounds, keepalive_s=config.keepalive_s))
    app.include_router(mcp_router(hub))
    records = ResponseRecords(jobs, store)
    jobs.resumer = Resumer(jobs, service, store, records.unstored, config.served_model_name)
    app.include_router(responses_router(service, records, config.served_model_name, limits,
                                        keepalive_s=config.keepalive_s))
    app.include_router(resources_router(records))
    sections = {"responses": lambda: responses_figures(store, jobs, records), "mcp": hub.summary}
    if template_check is not None:
        sections["template_check"] = lambda: template_check
    app.include_router(status_router(config, service, ["/v1/chat/completions", "/v1/responses"], sections=sections))

    return app


def share_affinity(config: ServerConfig, engine: Engine, store) -> SharedAffinity | None:
    """With a Redis store and engine replicas routed by affinity, the Maya replicas share where each prompt went
    (`engine/replicas/shared_affinity.py`), through the store's connection pool; None otherwise, or with the TTL at 0."""
    link = getattr(store, "link", None)
    if link is None or not config.replica_affinity_shared_ttl_s:
        return None
    shared = SharedAffinity(RedisAffinity(link), ttl_s=config.replica_affinity_shared_ttl_s,
                            lookup_blocks=config.replica_affinity_shared_lookup_blocks,
                            timeout_s=config.store_command_timeout)
    return shared if engine.share_affinity(shared) else None


async def responses_figures(store, jobs: JobManager, records: ResponseRecords) -> dict:
    """/v1/status's `responses` section: the store's figures read afresh (a shared store's from Redis)."""
    return {"cache": await store.fresh_stats(), "jobs": await jobs.fresh_stats(), "unstored": records.unstored.stats()}


def middleware(config: ServerConfig, shutdown: Shutdown, metrics: Metrics) -> list[Middleware]:
    """The middleware stack, outermost first: metrics see every answer; the shutdown gate answers what has not
    started when draining begins; the guard refuses forged requests before CORS and auth; CORS answers
    preflights before auth; websockets are refused before they reach a route."""
    cors = [Middleware(
        JsonErrorCORSMiddleware,
        allow_origins=list(config.cors_origins),
        allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
        allow_headers=["*"],
        max_age=600,
    )] if config.cors_origins else []
    return [
        Middleware(RequestMetricsMiddleware, metrics=metrics),
        Middleware(ShutdownGate, shutdown=shutdown),
        Middleware(RequestGuard, listen_host=config.host, allowed_hosts=config.allowed_hosts,
                   allowed_origins=config.cors_origins),
        *cors,
        Middleware(WebSocketRefusal),
        Middleware(ApiKeyMiddleware, keys=config.api_keys, metrics_public=config.metrics_public),
    ]


def image_limits(config: ServerConfig) -> ImageLimits:
    """The `image_*` settings as the image loader's limits: each field is its setting without the `image_`
    prefix, and the bound is `image_max_side` tightened by the embedded engine's projector (a remote one's
    file cannot be read)."""
    projector = read_projector(config.mmproj) if config.engine == "llamacpp" else None
    settings = {f.name: getattr(config, f"image_{f.name}") for f in fields(ImageLimits) if f.name != "bound"}
    return ImageLimits(**settings, bound=bound_for(config.image_max_side, projector))


def mcp_settings(config: ServerConfig) -> McpSettings:
    """The `mcp_*` settings the MCP servers are run with: each field is its setting without the `mcp_` prefix."""
    return McpSettings(**{f.name: getattr(config, f"mcp_{f.name}") for f in fields(McpSettings)})
