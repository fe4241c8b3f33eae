"""Render every error as OpenAI's `{"error": {message, type, param, code}}`."""

from __future__ import annotations

import logging

import orjson
from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from ..errors import ClientGone, MayaError

log = logging.getLogger("maya.http")


def error_response(error: MayaError, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(error.body()), status_code=error.status, media_type="application/json",
                    headers={**error.headers(), **(headers or {})})


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(MayaError)
    async def maya_error(_: Request, exc: MayaError) -> Response:
        return error_response(exc)

    @app.exception_handler(ClientGone)
    async def client_gone(_: Request, exc: ClientGone) -> Response:
        return Response(status_code=499)  # the client left (mid-upload, say): nobody to answer, nothing wrong

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> Response:
        body = {"error": {
            "message": str(exc.detail),
            "type": "invalid_request_error" if exc.status_code < 500 else "server_error",
            "param": None,
            "code": {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code),
        }}
        return Response(orjson.dumps(body), status_code=exc.status_code, media_type="application/json")

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> Response:
        log.exception("unhandled error: %s", type(exc).__name__)
        return error_response(MayaError("The server had an error while processing your request."))
