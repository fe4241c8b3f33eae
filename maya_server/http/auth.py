"""API-key authentication for every /v1 route and the metrics, as ASGI middleware.

Accepts `Authorization: Bearer <key>` or `x-api-key: <key>`; compares in
constant time against every configured key. The request's owner scope (a hash
of the key, never the key) is left in `scope["state"]["owner"]` for stores
that isolate records per key. Preflight requests never reach here: the CORS
middleware, outside this one, answers them. `/metrics/prometheus` needs the key
too (its figures describe the traffic) unless `metrics_public` opens it for a
scraper; `/health`, `/openapi.json` and `/docs` are always open.
"""

from __future__ import annotations

import hashlib
import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import AuthenticationError
from .errors import error_response

PUBLIC_OWNER = "public"
API_PREFIX = "/v1"
METRICS_PREFIX = "/metrics"


def owner_of(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class ApiKeyMiddleware:
    def __init__(self, app: ASGIApp, keys: tuple[str, ...], *, metrics_public: bool = False) -> None:
        self.app = app
        self._keys = tuple(k.encode("utf-8") for k in keys)
        self._protected = (API_PREFIX,) if metrics_public else (API_PREFIX, METRICS_PREFIX)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self._protected):
            await self.app(scope, receive, send)
            return
        if not self._keys:
            scope.setdefault("state", {})["owner"] = PUBLIC_OWNER
            await self.app(scope, receive, send)
            return
        presented = _presented_key(scope)
        if presented is None or not self._matches(presented):
            error = AuthenticationError(
                "Incorrect API key provided." if presented else "You didn't provide an API key. "
                "Send it as 'Authorization: Bearer <key>' or 'x-api-key: <key>'."
            )
            await error_response(error, {"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        scope.setdefault("state", {})["owner"] = owner_of(presented.decode("utf-8", "replace"))
        await self.app(scope, receive, send)

    def _matches(self, presented: bytes) -> bool:
        found = False
        for key in self._keys:  # no early exit: every key is compared
            found |= hmac.compare_digest(presented, key)
        return found


def _presented_key(scope: Scope) -> bytes | None:
    headers = dict(scope["headers"])
    authorization = headers.get(b"authorization", b"")
    if authorization[:7].lower() == b"bearer ":
        return authorization[7:].strip() or None
    api_key = headers.get(b"x-api-key", b"").strip()
    return api_key or None
