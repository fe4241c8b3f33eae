"""The operator's MCP servers, in the `mcpServers` shape MCP clients already use.

    {"name": {"command": "python", "args": ["srv.py"], "env": {"K": "v"}, "cwd": "/srv"}}   stdio
    {"name": {"url": "http://127.0.0.1:9000/mcp", "headers": {"Authorization": "Bearer …"}}}  Streamable HTTP

Only this configuration defines servers: a request can ask for the configured
tools (`strata_mcp: true`) but never name a command or a URL. Every problem is
a `ConfigError` naming the server and field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

import orjson

from ..errors import ConfigError

_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_STDIO_KEYS = {"command", "args", "env", "cwd", "type", "transport"}
_HTTP_KEYS = {"url", "headers", "type", "transport"}


@dataclass(frozen=True)
class McpServerSpec:
    """One configured server. `headers` and `env` may hold credentials: they are never shown or logged."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "streamable-http"


def parse_mcp_servers(name: str, value: Any) -> tuple[McpServerSpec, ...]:
    """`mcp_servers` from the config file (an object) or the environment (its JSON text)."""
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise ConfigError(name, "must be a JSON object of MCP servers") from None
    if not isinstance(value, dict):
        raise ConfigError(name, "must be an object mapping server names to {command, args, env, cwd} or {url, headers}")
    return tuple(_server(f"{name}.{key}", key, raw) for key, raw in value.items())


def load_mcp_config_file(name: str, path: str) -> tuple[McpServerSpec, ...]:
    """A `--mcp-config FILE`: `{"mcpServers": {...}}` as MCP clients write it (a bare map is accepted too)."""
    try:
        data = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ConfigError(name, f"cannot read {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(name, f"{path} is not valid JSON: {exc}") from None
    if isinstance(data, dict) and "mcpServers" in data:
        data = data["mcpServers"]
    return parse_mcp_servers(f"{name} ({path}) mcpServers", data)


def _server(where: str, name: str, raw: Any) -> McpServerSpec:
    if not name or not set(name) <= _NAME_CHARS or len(name) > 64:
        raise ConfigError(where, "server names are 1-64 letters, digits, '_' or '-'")
    if not isinstance(raw, dict):
        raise ConfigError(where, "must be an object")
    if ("command" in raw) == ("url" in raw):
        raise ConfigError(where, "needs exactly one of 'command' (stdio) or 'url' (Streamable HTTP)")
    allowed = _STDIO_KEYS if "command" in raw else _HTTP_KEYS
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}", "unknown key")
    if "command" in raw:
        return McpServerSpec(
            name, command=_text(f"{where}.command", raw["command"]),
            args=tuple(_texts(f"{where}.args", raw.get("args", []))),
            env=_string_map(f"{where}.env", raw.get("env", {})),
            cwd=_text(f"{where}.cwd", raw["cwd"]) if raw.get("cwd") is not None else None,
        )
    return McpServerSpec(name, url=_url(f"{where}.url", raw["url"]),
                         headers=_string_map(f"{where}.headers", raw.get("headers", {})))


def _text(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(where, "must be a non-empty string")
    return value


def _texts(where: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(where, "must be a list of strings")
    return value


def _string_map(where: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigError(where, "must be an object of string values")
    return dict(value)


def _url(where: str, value: Any) -> str:
    text = _text(where, value)
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(where, "must be an http:// or https:// URL")
    if parts.username or parts.password:
        raise ConfigError(where, "must not carry credentials; put them in 'headers'")
    return text
