"""Fetching one image by http(s) URL, bounded in time and bytes, and never to a non-public address.

- The host is resolved first and every address it resolves to is checked
  (`address_policy`: IANA's special-purpose registries) unless
  `image_allow_private`; the connection then goes to the checked address, not
  to a second lookup, so a DNS answer that changes in between cannot slip past
  (the `Host` header and TLS name stay the URL's). Each redirect (at most
  `image_max_redirects`) is read as strictly as the first URL and checked again.
- `image_fetch_timeout` bounds connecting and each read; `image_fetch_deadline`
  bounds the whole fetch, redirects included, so a server that sends a byte a
  second cannot hold it open for long.
- The body is read in pieces, each taken from the server's image memory
  (`image_memory.Holding`) before it is kept, and abandoned past `image_max_bytes`.
- Every failure is a `BadImage` (a 400 at the image's param, from the loader),
  except a full memory pool (a 429). A fetch whose task is cancelled (its
  client left, the server is stopping) closes its connection at once.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass
from typing import Awaitable, Callable

import certifi
import httpx

from .address_policy import parse_address, refusal
from ..errors import BadImage
from .memory import Holding
from .url import FetchUrl, redirect_target

READ_CHUNK = 65536

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""host, port -> the addresses to connect to."""


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


@dataclass(frozen=True)
class FetchLimits:
    max_bytes: int
    timeout: float
    deadline: float
    max_redirects: int
    allow_private: bool


class ImageFetcher:
    """`resolver` and `transport` are the two ways out to the network (tests replace them)."""

    def __init__(self, limits: FetchLimits, *, resolver: Resolver = system_resolver,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.limits = limits
        self._resolver = resolver
        self._transport = transport
        self._tls: ssl.SSLContext | None = None

    async def _tls_context(self) -> ssl.SSLContext:
        """One TLS context for every fetch, made off the event loop: loading the CA bundle takes ~40 ms of
        CPU, which a client per fetch would spend on the loop each time."""
        if self._tls is None:
            self._tls = await asyncio.to_thread(ssl.create_default_context, cafile=certifi.where())
        return self._tls

    async def fetch(self, url: FetchUrl, held: Holding, param: str | None) -> bytearray:
        """The body at `url`, or `BadImage`; its bytes are taken from `held` as they arrive."""
        try:
            async with asyncio.timeout(self.limits.deadline):
                return await self._fetch(url, held, param)
        except TimeoutError:
            raise BadImage(f"Fetching the image took longer than {self.limits.deadline}s "
                           "(setting image_fetch_deadline).", "deadline") from None

    async def _fetch(self, url: FetchUrl, held: Holding, param: str | None) -> bytearray:
        async with httpx.AsyncClient(transport=self._transport, timeout=httpx.Timeout(self.limits.timeout),
                                     verify=await self._tls_context(), follow_redirects=False,
                                     trust_env=False) as client:
            for _ in range(self.limits.max_redirects + 1):
                target = await self._checked_target(url)
                try:
                    async with client.stream("GET", target, headers={"Host": url.host_header},
                                             extensions={"sni_hostname": url.host}) as response:
                        if response.is_redirect:
                            url = redirect_target(url, response.headers.get("location", ""))
                            continue
                        if response.status_code != 200:
                            raise BadImage(f"Fetching the image failed: HTTP {response.status_code}.", "http_status")
                        return await self._read(response, held, param)
                except BadImage:
                    raise
                except httpx.TimeoutException:
                    raise BadImage(f"Fetching the image timed out ({self.limits.timeout}s without a byte, "
                                   "setting image_fetch_timeout).", "timeout") from None
                except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError, ValueError) as exc:
                    raise BadImage(f"Fetching the image failed ({type(exc).__name__}).", "fetch") from None
        raise BadImage(f"The image URL redirected more than {self.limits.max_redirects} times.", "redirects")

    async def _checked_target(self, url: FetchUrl) -> str:
        """The URL to request: the checked address in place of the name."""
        if url.literal is not None:
            addresses = [url.literal]
        else:
            try:
                addresses = [parse_address(a) for a in await self._resolver(url.host, url.port)]
            except (OSError, UnicodeError, ValueError):
                raise BadImage(f"The image URL's host {url.host[:100]!r} does not resolve.", "dns") from None
        if not addresses:
            raise BadImage(f"The image URL's host {url.host[:100]!r} does not resolve.", "dns")
        if not self.limits.allow_private:
            for address in addresses:
                why = refusal(address)
                if why is not None:
                    raise BadImage(f"The image URL's host resolves to a non-public address ({why}), which this "
                                   "server does not fetch from (setting image_allow_private).", "address")
        return url.via(str(addresses[0]))

    async def _read(self, response: httpx.Response, held: Holding, param: str | None) -> bytearray:
        length = response.headers.get("content-length")
        if length and length.isdigit() and int(length) > self.limits.max_bytes:
            raise too_big(self.limits.max_bytes)
        body = bytearray()
        async for piece in response.aiter_bytes(READ_CHUNK):
            if len(body) + len(piece) > self.limits.max_bytes:
                raise too_big(self.limits.max_bytes)
            held.take(len(piece), param)
            body += piece
        return body


def too_big(max_bytes: int) -> BadImage:
    return BadImage(f"The image is larger than {max_bytes} bytes (setting image_max_bytes).", "too_big")
