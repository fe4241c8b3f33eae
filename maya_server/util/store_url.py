"""`--store memory|redis://…|redis+sentinel://…`: the setting's check and the URL as it may be shown.

A Sentinel URL names the sentinels and the service they monitor, not a node:
`redis+sentinel://[[user]:password@]host:port[,host:port…]/SERVICE[/DB]` (`rediss+sentinel://` for TLS to the
data nodes); the user and password are the data nodes' (else `--store-password-file`).

The check is the configuration's (`config.py` refuses a bad `--store` before anything starts); the store is opened
from the checked URL by `responses/store/opening.py`. Both read it here, so the configuration imports nothing of
`responses/`.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from ..errors import ConfigError

REDIS_SCHEMES = ("redis", "rediss", "unix")
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
_EXPECTED = "must be 'memory' or a redis://, rediss://, unix:// or redis+sentinel:// URL"


@dataclass(frozen=True)
class SentinelAddress:
    """A `redis+sentinel://` URL, read."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int
    username: str | None
    password: str | None
    tls: bool


def sentinel_address(url: str) -> SentinelAddress:
    """The sentinels, service, database and data credentials a Sentinel URL names; ValueError saying what is wrong."""
    scheme, _, rest = url.partition("://")
    if scheme not in SENTINEL_SCHEMES:
        raise ValueError("not a redis+sentinel:// URL")
    userinfo, at, rest = rest.rpartition("@")
    hosts, _, path = rest.partition("/")
    sentinels = []
    for host in filter(None, hosts.split(",")):
        name, colon, port = host.rpartition(":")
        if not colon or not name or not port.isdigit():
            raise ValueError(f"each sentinel is host:port, got {host!r}")
        sentinels.append((name, int(port)))
    parts = [part for part in path.split("/") if part]
    if not sentinels or not parts or len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise ValueError("the form is redis+sentinel://[[user]:password@]host:port[,host:port...]/SERVICE[/DB]")
    username, _, password = userinfo.partition(":") if at else ("", "", "")
    return SentinelAddress(tuple(sentinels), unquote(parts[0]), int(parts[1]) if len(parts) == 2 else 0,
                           unquote(username) or None, unquote(password) or None, scheme.startswith("rediss"))


def check_store_url(name: str, value: object) -> str:
    """The `store` setting: `memory` or a Redis URL (its scheme and host checked, nothing connected)."""
    if not isinstance(value, str) or not value:
        raise ConfigError(name, f"{_EXPECTED}, got {value!r}")
    if value == "memory":
        return value
    if value.partition("://")[0] in SENTINEL_SCHEMES:
        try:
            sentinel_address(value)
        except ValueError as error:
            raise ConfigError(name, f"{error}: {shown_url(value)!r}") from None
        return value
    parts = urlsplit(value)
    if parts.scheme not in REDIS_SCHEMES:
        raise ConfigError(name, f"{_EXPECTED}, got {shown_url(value)!r}")
    if parts.scheme == "unix" and not parts.path:
        raise ConfigError(name, "a unix:// URL names the socket's path, e.g. unix:///run/redis/redis.sock")
    if parts.scheme != "unix" and not parts.hostname:
        raise ConfigError(name, f"names no host: {shown_url(value)!r}")
    return value


def shown_url(url: str) -> str:
    """The URL without user name or password: what status pages, metrics and errors may show."""
    scheme, separator, rest = url.partition("://")
    if scheme in SENTINEL_SCHEMES:
        return scheme + separator + rest.rpartition("@")[2]
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
