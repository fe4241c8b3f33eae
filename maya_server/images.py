"""Image inputs, fetched and decoded safely before the engine sees a request.

Every `ImagePart` of a conversation is turned into BMP bytes here, concurrently,
outside the engine queue: a data URL is checked (base64, an image media type),
an http(s) URL is fetched. Fetching is bounded and refuses to be used against
the server's own network:

- only http and https; connect/read timeouts; at most `image_max_redirects`;
- the host is resolved first and every address it resolves to is checked
  (loopback, private, link-local — the cloud metadata address among them —,
  multicast, reserved, unspecified are refused unless `image_allow_private`);
  the connection then goes to the checked address, not to a second lookup, so a
  DNS answer that changes in between cannot slip past; each redirect is checked
  again the same way;
- the body is read in pieces and abandoned once it passes `image_max_bytes`.

Decoding is Pillow's, for PNG/JPEG/WebP/GIF (first frame)/BMP, after the header
says width × height is within `image_max_pixels` (a decompression bomb is refused
before its pixels are). Every failure is a 400 naming the image's `param`, and
nothing has reached the engine.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import ipaddress
import socket
import time
from dataclasses import dataclass, replace
from typing import Awaitable, Callable
from urllib.parse import urljoin, urlsplit

import httpx

from .config import ServerConfig
from .conversation import Conversation, ImagePart, Message, ToolResult, image_parts
from .errors import ImageError
from .metrics import Metrics

FORMATS = {"PNG", "JPEG", "WEBP", "GIF", "BMP"}
DATA_TYPES = {"image/png", "image/jpeg", "image/jpg", "image/webp", "image/gif", "image/bmp"}
READ_CHUNK = 65536

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""host, port -> the addresses to connect to."""


@dataclass(frozen=True)
class ImageLimits:
    """The `image_*` settings; the defaults are ServerConfig's own."""

    max_bytes: int = ServerConfig.image_max_bytes
    max_pixels: int = ServerConfig.image_max_pixels
    max_count: int = ServerConfig.image_max_count
    fetch_timeout: float = ServerConfig.image_fetch_timeout
    max_redirects: int = ServerConfig.image_max_redirects
    allow_private: bool = ServerConfig.image_allow_private

    @classmethod
    def from_config(cls, config: ServerConfig) -> "ImageLimits":
        return cls(config.image_max_bytes, config.image_max_pixels, config.image_max_count,
                   config.image_fetch_timeout, config.image_max_redirects, config.image_allow_private)


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


def refused_address(address: str) -> str | None:
    """Why connecting to `address` would reach the server's own network, or None when it is public."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for check, why in (("is_loopback", "loopback"), ("is_link_local", "link-local (cloud metadata)"),
                       ("is_private", "private"), ("is_multicast", "multicast"), ("is_reserved", "reserved"),
                       ("is_unspecified", "unspecified")):
        if getattr(ip, check):
            return why
    return None


class ImageLoader:
    """Example: `conversation = await loader.load(conversation)`; every ImagePart then has `data` (BMP).

    `resolver` and `transport` are the two ways out to the network (tests replace them)."""

    def __init__(self, limits: ImageLimits, metrics: Metrics | None = None, *, resolver: Resolver = system_resolver,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.limits = limits
        self.metrics = metrics
        self._resolver = resolver
        self._transport = transport

    async def load(self, conversation: Conversation) -> Conversation:
        images = [p for p in image_parts(conversation) if p.data is None]
        if not images:
            return conversation
        if len(images) > self.limits.max_count:
            raise self._refuse(f"At most {self.limits.max_count} images are accepted in one request "
                               f"(this one has {len(images)}).", images[self.limits.max_count].param, "too_many")
        started = time.monotonic()
        data = await asyncio.gather(*(self._one(image) for image in images))
        if self.metrics is not None:
            self.metrics.image_seconds.observe(time.monotonic() - started)
        loaded = {id(image): replace(image, data=bmp) for image, bmp in zip(images, data)}
        return replace(conversation, turns=tuple(_with_parts(turn, loaded) for turn in conversation.turns))

    async def _one(self, image: ImagePart) -> bytes:
        url = image.url
        if url.startswith("data:"):
            raw, source = self._data_url(url, image.param), "data_url"
        elif urlsplit(url).scheme.lower() in ("http", "https"):
            raw, source = await self._fetch(url, image.param), "url"
        else:
            raise self._refuse("An image URL must be an http(s) URL or a data URL.", image.param, "scheme")
        bmp = await asyncio.to_thread(self._decode, raw, image.param)
        if self.metrics is not None:
            self.metrics.images.labels(source).inc()
            self.metrics.image_bytes.inc(len(raw))
        return bmp

    def _data_url(self, url: str, param: str | None) -> bytes:
        header, comma, payload = url[5:].partition(",")
        media_type, _, encoding = header.partition(";")
        if not comma or encoding.lower() != "base64":
            raise self._refuse("A data URL image must be base64: data:image/png;base64,....", param, "data_url")
        if media_type.lower() not in DATA_TYPES:
            raise self._refuse(f"Unsupported image media type {media_type[:60]!r}; use image/png, image/jpeg, "
                               "image/webp, image/gif or image/bmp.", param, "media_type")
        if len(payload) * 3 // 4 > self.limits.max_bytes:
            raise self._too_big(param)
        try:
            return base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise self._refuse("The data URL's image is not valid base64.", param, "base64") from None

    async def _fetch(self, url: str, param: str | None) -> bytes:
        timeout = httpx.Timeout(self.limits.fetch_timeout)
        async with httpx.AsyncClient(transport=self._transport, timeout=timeout, follow_redirects=False,
                                     trust_env=False) as client:
            for _ in range(self.limits.max_redirects + 1):
                target, headers, extensions = await self._checked_target(url, param)
                try:
                    async with client.stream("GET", target, headers=headers, extensions=extensions) as response:
                        if response.is_redirect and "location" in response.headers:
                            url = urljoin(url, response.headers["location"])
                            continue
                        if response.status_code != 200:
                            raise self._refuse(f"Fetching the image failed: HTTP {response.status_code}.",
                                               param, "http_status")
                        return await self._read_bounded(response, param)
                except httpx.TimeoutException:
                    raise self._refuse(f"Fetching the image timed out ({self.limits.fetch_timeout}s).",
                                       param, "timeout") from None
                except httpx.HTTPError as exc:
                    raise self._refuse(f"Fetching the image failed ({type(exc).__name__}).", param, "fetch") from None
        raise self._refuse(f"The image URL redirected more than {self.limits.max_redirects} times.", param, "redirects")

    async def _checked_target(self, url: str, param: str | None) -> tuple[str, dict, dict]:
        """The URL to request (the checked address in place of the name), its Host header and TLS name."""
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise self._refuse("An image URL must be an http(s) URL with a host.", param, "scheme")
        host = parts.hostname
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        try:
            literal = ipaddress.ip_address(host)
            addresses = [str(literal)]
        except ValueError:
            try:
                addresses = await self._resolver(host, port)
            except OSError:
                raise self._refuse(f"The image URL's host {host[:100]!r} does not resolve.", param, "dns") from None
        if not addresses:
            raise self._refuse(f"The image URL's host {host[:100]!r} does not resolve.", param, "dns")
        if not self.limits.allow_private:
            for address in addresses:
                why = refused_address(address)
                if why is not None:
                    raise self._refuse(f"The image URL's host resolves to a {why} address, which this server "
                                       "does not fetch from (setting image_allow_private).", param, "address")
        address = addresses[0]
        netloc = f"[{address}]" if ":" in address else address
        target = parts._replace(netloc=f"{netloc}:{port}").geturl()
        return target, {"Host": parts.netloc.rsplit("@", 1)[-1]}, {"sni_hostname": host}

    async def _read_bounded(self, response: httpx.Response, param: str | None) -> bytes:
        length = response.headers.get("content-length")
        if length and length.isdigit() and int(length) > self.limits.max_bytes:
            raise self._too_big(param)
        body = bytearray()
        async for piece in response.aiter_bytes(READ_CHUNK):
            body += piece
            if len(body) > self.limits.max_bytes:
                raise self._too_big(param)
        return bytes(body)

    def _decode(self, raw: bytes, param: str | None) -> bytes:
        from PIL import Image

        try:
            with Image.open(io.BytesIO(raw)) as image:
                if image.format not in FORMATS:
                    raise self._refuse(f"Unsupported image format {image.format}; use PNG, JPEG, WebP, GIF or BMP.",
                                       param, "format")
                width, height = image.size
                if width * height > self.limits.max_pixels:
                    raise self._refuse(f"The image is {width}x{height} pixels; at most {self.limits.max_pixels} "
                                       "pixels are accepted (setting image_max_pixels).", param, "pixels")
                image.seek(0)  # a GIF's first frame
                out = io.BytesIO()
                image.convert("RGB").save(out, format="BMP")  # lossless and ~15x cheaper to write than PNG
                return out.getvalue()
        except ImageError:
            raise
        except Image.DecompressionBombError:
            raise self._refuse("The image has too many pixels (setting image_max_pixels).", param, "pixels") from None
        except Exception:  # Pillow's decoders raise many types on malformed input; each is the client's bad image
            raise self._refuse("The image could not be decoded (truncated or not an image).", param, "decode") from None

    def _too_big(self, param: str | None) -> ImageError:
        return self._refuse(f"The image is larger than {self.limits.max_bytes} bytes (setting image_max_bytes).",
                            param, "too_big")

    def _refuse(self, message: str, param: str | None, reason: str) -> ImageError:
        if self.metrics is not None:
            self.metrics.image_rejections.labels(reason).inc()
        return ImageError(message, param=param, reason=reason)


def _with_parts(turn, loaded: dict[int, ImagePart]):
    if not any(id(p) in loaded for p in turn.content):
        return turn
    assert isinstance(turn, (Message, ToolResult))
    return replace(turn, content=tuple(loaded.get(id(p), p) for p in turn.content))
