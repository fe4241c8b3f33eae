"""An image URL, read strictly before anything is fetched: a data URL's header, or an http(s) URL's parts.

Why our own reading: `urllib.parse` raises ValueError from `.port` on a bad port
and accepts hosts that name nothing (`a..b`, a 64-letter label, `2130706433`,
which resolvers read as 127.0.0.1), Python's IDNA codec raises UnicodeError, and
httpx's `InvalidURL` is not an `HTTPError`; each of those became a 500. Here
every malformed URL is one `BadImage` with a reason and a sentence, which the
caller turns into a 400 `invalid_image` at the image's param. Schemes are
case-insensitive (RFC 3986), as in OpenAI's API.

An http(s) URL passes when it has a host that is a bracketed IPv6 address, a
canonical dotted IPv4 address, or a DNS name of 1-63 character labels of
letters, digits, `-` and `_` (non-ASCII names by IDNA) whose last label is not
numeric; a port 1-65535; and no whitespace, control character or backslash.
User info is accepted and never sent.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from .address_policy import IPAddress
from ..errors import BadImage

DATA_TYPES = ("image/png", "image/jpeg", "image/jpg", "image/webp", "image/gif", "image/bmp")
MAX_DATA_HEADER = 256
"""The longest `data:` header (media type and `;base64`) looked for before the comma."""
MAX_URL_CHARS = 8192
"""The longest http(s) image URL (a data URL is bounded by the request body instead)."""
_FORBIDDEN = re.compile(r"[\x00-\x20\x7f\\]")
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
DEFAULT_PORTS = {"http": 80, "https": 443}


def bad_url(message: str, reason: str = "url") -> BadImage:
    return BadImage(message, reason)


@dataclass(frozen=True)
class DataUrl:
    media_type: str
    start: int
    """Where the base64 text begins in the URL: it is decoded from there, never copied out first (a data
    URL may be tens of megabytes)."""


@dataclass(frozen=True)
class FetchUrl:
    """An http(s) URL taken apart: the connection goes to a checked address, the rest of the request is
    built from these parts."""

    scheme: str
    host: str
    """ASCII (IDNA), lower case; an IPv6 address without brackets."""
    port: int
    path: str
    """Path and query, never empty; the fragment is dropped."""
    literal: IPAddress | None
    """The host, when it is an IP address (nothing to resolve)."""

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"

    def via(self, address: str) -> str:
        """This URL with `address` (checked, resolved) in place of the host."""
        host = f"[{address}]" if ":" in address else address
        return f"{self.scheme}://{host}:{self.port}{self.path}"

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host_header}{self.path}"


def is_data_url(url: str) -> bool:
    return url[:5].lower() == "data:"


def parse_data_url(url: str) -> DataUrl:
    comma = url.find(",", 5, 5 + MAX_DATA_HEADER)
    header = url[5:comma] if comma >= 0 else ""
    media_type, _, encoding = header.partition(";")
    if comma < 0 or encoding.lower() != "base64":
        raise bad_url("A data URL image must be base64: data:image/png;base64,....", "data_url")
    if media_type.lower() not in DATA_TYPES:
        raise bad_url(f"Unsupported image media type {media_type[:60]!r}; use image/png, image/jpeg, "
                          "image/webp, image/gif or image/bmp.", "media_type")
    return DataUrl(media_type.lower(), comma + 1)


def check_image_url(url: str) -> None:
    """Raise `BadImage` unless `url` is a well-formed data URL or http(s) URL (nothing is fetched)."""
    if is_data_url(url):
        parse_data_url(url)
    else:
        parse_fetch_url(url)


def parse_fetch_url(url: str) -> FetchUrl:
    scheme = url.partition(":")[0].lower()
    if scheme not in DEFAULT_PORTS:
        raise bad_url("An image URL must be an http(s) URL or a data URL.", "scheme")
    if len(url) > MAX_URL_CHARS:
        raise bad_url(f"The image URL is longer than {MAX_URL_CHARS} characters.")
    if _FORBIDDEN.search(url):
        raise bad_url("The image URL contains whitespace, a control character or a backslash; "
                          "percent-encode them.")
    try:
        parts = urlsplit(url)
    except ValueError:
        raise bad_url("The image URL is malformed (an unbalanced '[' or ']', or a host that Unicode "
                          "normalization changes).") from None
    host_port = parts.netloc.rpartition("@")[2]
    host, literal, port = _host_and_port(host_port, scheme)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return FetchUrl(scheme, host, port, path, literal)


def redirect_target(current: FetchUrl, location: str) -> FetchUrl:
    """Where a redirect's `Location` points, read as strictly as the first URL (a `data:` URL, another
    scheme or a malformed one is refused)."""
    if not location.strip():
        raise bad_url("The image URL redirected without a Location.", "redirect")
    try:
        target = urljoin(str(current), location.strip())
        return parse_fetch_url(target)
    except BadImage as exc:
        raise bad_url(f"The image URL redirected to an unusable URL: {exc}", "redirect") from None
    except ValueError:
        raise bad_url("The image URL redirected to a malformed URL.", "redirect") from None


def _host_and_port(host_port: str, scheme: str) -> tuple[str, IPAddress | None, int]:
    if host_port.startswith("["):
        inside, bracket, rest = host_port[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise bad_url("The image URL's brackets do not enclose an IPv6 address.")
        literal = _ipv6(inside)
        return str(literal), literal, _port(rest[1:] if rest else "", scheme)
    host, colon, port_text = host_port.partition(":")
    if ":" in port_text:
        raise bad_url("The image URL's host has more than one ':' (an IPv6 address needs brackets).")
    name = _ascii_name(host)
    literal = ipaddress.IPv4Address(name) if _is_dotted_quad(name) else None
    return name, literal, _port(port_text if colon else "", scheme)


def _ipv6(text: str) -> ipaddress.IPv6Address:
    if "%" in text:
        raise bad_url("The image URL's IPv6 address has a zone (%...), which names a local interface.")
    try:
        return ipaddress.IPv6Address(text)
    except ValueError:
        raise bad_url(f"The image URL's brackets hold {text[:60]!r}, which is not an IPv6 address.") from None


def _port(text: str, scheme: str) -> int:
    if not text:
        return DEFAULT_PORTS[scheme]
    if not text.isascii() or not text.isdigit() or len(text) > 5 or not 1 <= int(text) <= 65535:
        raise bad_url(f"The image URL's port {text[:20]!r} is not a number from 1 to 65535.")
    return int(text)


def _ascii_name(host: str) -> str:
    """The host as DNS knows it (IDNA for non-ASCII, lower case), or `BadImage`."""
    if not host:
        raise bad_url("The image URL has no host.")
    try:
        name = host.encode("idna").decode("ascii").lower() if not host.isascii() else host.lower()
    except UnicodeError:
        raise bad_url("The image URL's host is not a valid internationalized name (IDNA).") from None
    labels = name[:-1].split(".") if name.endswith(".") else name.split(".")
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise bad_url("The image URL's host is not a valid name: every dot-separated label must be 1-63 "
                          "letters, digits, '-' or '_', not starting or ending with '-'.")
    for label in labels:
        if label.startswith("xn--"):
            _check_punycode(label)
    if _NUMERIC_LABEL.fullmatch(labels[-1]) and not _is_dotted_quad(name):
        raise bad_url("The image URL's host looks numeric but is not a dotted IPv4 address (a.b.c.d).")
    return name


def _check_punycode(label: str) -> None:
    try:
        label.encode("ascii").decode("idna")  # punycode that round-trips through IDNA
    except UnicodeError:
        raise bad_url(f"The image URL's host label {label[:63]!r} is not valid punycode (IDNA).") from None


def _is_dotted_quad(name: str) -> bool:
    try:
        ipaddress.IPv4Address(name)
        return True
    except ValueError:
        return False
