"""CORS for the configured origins, with refused preflights in OpenAI's error shape.

Starlette answers a preflight it refuses with plain text; clients (and the
spec) expect every error as `{"error": {...}}`, so the refusal is re-rendered,
keeping Starlette's decision and its CORS headers.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response

from ..errors import PermissionDeniedError
from .errors import error_response


class JsonErrorCORSMiddleware(CORSMiddleware):
    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        refused = response.body.decode("utf-8", "replace")  # e.g. "Disallowed CORS method, headers"
        kept = {k: v for k, v in response.headers.items() if k.lower() not in ("content-type", "content-length")}
        error = PermissionDeniedError(f"This cross-origin request is not allowed: {refused}.", code="cors_refused")
        return error_response(error, {**kept})
