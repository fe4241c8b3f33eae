"""`--store memory|redis://…`: the setting's check and the URL as it may be shown.

The check is the configuration's (`config.py` refuses a bad `--store` before anything starts); the store is opened
from the checked URL by `responses/store/opening.py`. Both read it here, so the configuration imports nothing of
`responses/`.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigError

REDIS_SCHEMES = ("redis", "rediss", "unix")


def check_store_url(name: str, value: object) -> str:
    """The `store` setting: `memory` or a Redis URL (its scheme and host checked, nothing connected)."""
    if not isinstance(value, str) or not value:
        raise ConfigError(name, f"must be 'memory' or a redis://, rediss:// or unix:// URL, got {value!r}")
    if value == "memory":
        return value
    parts = urlsplit(value)
    if parts.scheme not in REDIS_SCHEMES:
        raise ConfigError(name, f"must be 'memory' or a redis://, rediss:// or unix:// URL, got {shown_url(value)!r}")
    if parts.scheme == "unix" and not parts.path:
        raise ConfigError(name, "a unix:// URL names the socket's path, e.g. unix:///run/redis/redis.sock")
    if parts.scheme != "unix" and not parts.hostname:
        raise ConfigError(name, f"names no host: {shown_url(value)!r}")
    return value


def shown_url(url: str) -> str:
    """The URL without user name or password: what status pages, metrics and errors may show."""
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
