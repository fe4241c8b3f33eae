"""Operational endpoints: /health, /v1/models, /v1/status, /metrics/prometheus."""

from __future__ import annotations

import time
from inspect import isawaitable
from typing import Any, Awaitable, Callable, Mapping

from fastapi import APIRouter
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import JSONResponse, Response

from ..config import ServerConfig
from ..errors import NotFoundError
from ..pipeline.generation import GenerationService

def status_router(
    config: ServerConfig,
    service: GenerationService,
    endpoints: list[str],
    sections: Mapping[str, Callable[[], dict | Awaitable[dict]]] = {},
) -> APIRouter:
    """`endpoints` are the API endpoints served, listed under `endpoints` in /v1/status (and under `dialects`, the
    key's old name, kept for scripts written against it: it never meant the model family);
    `sections` add named aggregate figures (e.g. the response store's) to it; a section may be a coroutine
    (a shared store's figures are a round trip away)."""
    router = APIRouter()
    started = time.time()
    model_id = config.served_model_name

    @router.get("/health")
    async def health() -> dict:
        return {"status": "ok"}

    @router.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [_model(model_id, started)]}

    @router.get("/v1/models/{model}")
    async def model(model: str) -> Response:
        if model != model_id:
            raise NotFoundError(f"The model '{model}' does not exist.", param="model", code="model_not_found")
        return JSONResponse(_model(model_id, started))

    @router.get("/v1/status")
    async def status() -> dict:
        body = {
            "model": model_id,
            "family": config.family,
            "family_reason": config.family_reason,
            "engine": service.engine.describe(),
            "context_size": service.engine.context_size,
            "queue": service.queue.describe(),
            "constrained_decoding": {"enabled": service.constrain, **service.engine.describe_grammar()},
            "uptime_s": round(time.time() - started, 3),
            "endpoints": list(endpoints),
            "dialects": list(endpoints),
        }
        for name, read in sections.items():
            body[name] = await _awaited(read())
        return body

    @router.get("/metrics/prometheus")
    async def metrics() -> Response:
        return Response(service.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return router


async def _awaited(value: Any) -> Any:
    return await value if isawaitable(value) else value


def _model(model_id: str, created: float) -> dict:
    return {"id": model_id, "object": "model", "created": int(created), "owned_by": "maya"}
