"""Refuse, before any work, requests a web page could forge: the keyless-mode safety net.

Without API keys anyone who can reach the port can use the model, which on
loopback means the local user. Two browser tricks would otherwise let any web
page the user opens act as that user:

- a cross-site request: a page may POST `text/plain` (no CORS preflight) to
  127.0.0.1, so a POST body must be `application/json` (415 otherwise), and a request
  whose `Origin` is neither an allowed CORS origin nor this server is a 403;
- DNS rebinding: a hostile name re-pointed at 127.0.0.1 makes the page
  same-origin, so the `Host` header must name this server: a loopback name or
  address, the listen address, or an `--allowed-host` (`*` turns the check off).

The checks hold with API keys too (they cost nothing, and a key in a browser
is no reason to accept a forged request). Refusals have OpenAI's error shape.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import InvalidRequestError, MayaError, PermissionDeniedError, UnsupportedMediaTypeError
from .errors import error_response

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})
WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", ""})
_HOST = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9._-]+))(?::(?P<port>[0-9]{1,5}))?")
"""RFC 9110's `Host`: `uri-host [ ":" port ]`, an IP literal in brackets or a name, and nothing after it."""
OPEN_PATHS = frozenset({"/health"})
"""Liveness probes (an orchestrator's, by the pod's address) answer whatever the Host: nothing to steal."""


class RequestGuard:
    def __init__(self, app: ASGIApp, *, listen_host: str, allowed_hosts: tuple[str, ...],
                 allowed_origins: tuple[str, ...]) -> None:
        self.app = app
        self._any_host = "*" in allowed_hosts
        names = {h.lower() for h in allowed_hosts} | LOOPBACK_NAMES
        if listen_host.lower() not in WILDCARD_ADDRESSES:
            names.add(listen_host.lower().strip("[]"))
        self._hosts = frozenset(names)
        self._any_origin = "*" in allowed_origins
        self._origins = frozenset(o.rstrip("/").lower() for o in allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            refusal = self._refusal(scope)
            if refusal is not None:
                await error_response(refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> MayaError | None:
        headers = Headers(scope=scope)
        hosts = headers.getlist("host")
        host = hosts[0] if hosts else ""
        if len(hosts) > 1 or (host and host_name(host) is None):
            return InvalidRequestError(
                "The request must carry one Host header naming a host, optionally with a port, and nothing else.",
                code="invalid_host_header",
            )
        if not self._host_allowed(host):
            return PermissionDeniedError(
                "The Host header does not name this server. Connect by a loopback address, or start Maya "
                "with --allowed-host NAME for the name you use.", code="host_not_allowed",
            )
        origin = headers.get("origin")
        if origin is not None and not self._origin_allowed(origin, host, scope.get("scheme", "http")):
            return PermissionDeniedError(
                "Requests from this web origin are not allowed. Start Maya with --cors-origin ORIGIN to allow it.",
                code="origin_not_allowed",
            )
        if scope["method"] == "POST" and not _json_or_bodiless(headers):
            return UnsupportedMediaTypeError("POST requests with a body must send 'Content-Type: application/json'.")
        return None

    def _host_allowed(self, host: str) -> bool:
        if self._any_host:
            return True
        name = host_name(host)
        if not name:
            return False
        if name in self._hosts:
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False

    def _origin_allowed(self, origin: str, host: str, scheme: str) -> bool:
        origin = origin.rstrip("/").lower()
        if self._any_origin or origin in self._origins:
            return True
        parts = urlsplit(origin)  # same origin, a page Maya itself serves: scheme and host:port both equal
        return parts.scheme == scheme and parts.netloc == host.lower() and not parts.path


def host_name(host: str) -> str | None:
    """The host of a `Host` value, or None when the value is not exactly `host[:port]`.
    '127.0.0.1:8080' → '127.0.0.1', '[::1]:8080' → '::1', 'Example.com' → 'example.com';
    '[::1]evil.com', 'localhost:evil', 'a b', 'host:99999' → None."""
    match = _HOST.fullmatch(host.strip())
    if match is None or (match["port"] is not None and int(match["port"]) > 65535):
        return None
    if match["v6"] is not None:
        try:
            return str(ipaddress.IPv6Address(match["v6"]))
        except ValueError:
            return None
    return match["name"].lower()


def _json_or_bodiless(headers: Headers) -> bool:
    """A JSON body, or no body and no content type at all (`POST .../cancel`)."""
    content_type = headers.get("content-type")
    if content_type is None:
        return headers.get("content-length", "0") == "0" and "transfer-encoding" not in headers
    return content_type.split(";", 1)[0].strip().lower() == "application/json"
