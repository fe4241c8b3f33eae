"""The application factory: `create_app(config, engine)` builds one independent server.

No global state: every app has its own metrics registry, engine queue and
services, so tests (and embedders) can build as many as they like.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from . import __version__
from .chat.routes import chat_router
from .config import ServerConfig
from .dialects import get_dialect
from .engine.base import Engine
from .engine.fifo import EngineQueue
from .generation import GenerationService
from .http.auth import ApiKeyMiddleware
from .http.errors import install_error_handlers
from .http.status import status_router
from .metrics import Metrics
from .http.request_metrics import RequestMetricsMiddleware
from .responses.routes import responses_router


def create_app(config: ServerConfig, engine: Engine) -> FastAPI:
    metrics = Metrics()
    queue = EngineQueue(
        engine.slots,
        config.max_queue,
        on_wait=metrics.queue_wait_seconds.observe,
        on_reject=metrics.queue_rejections.inc,
    )
    metrics.queue_waiting.set_function(lambda: queue.waiting)
    metrics.slots_busy.set_function(lambda: queue.busy)
    metrics.slots_total.set(engine.slots)
    metrics.watch_kv_states(engine.kv_state_stats)
    service = GenerationService(engine, get_dialect(config.family), queue, metrics)

    app = FastAPI(title="Maya", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.config = config
    app.state.service = service
    install_error_handlers(app)
    app.include_router(chat_router(service, config.served_model_name))
    app.include_router(responses_router(service, config.served_model_name))
    app.include_router(status_router(config, service, ["/v1/chat/completions", "/v1/responses"]))

    app.add_middleware(ApiKeyMiddleware, keys=config.api_keys)
    app.add_middleware(RequestMetricsMiddleware, metrics=metrics)
    if config.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=["*"],
            max_age=600,
        )
    return app
