"""How the MCP servers are run: timeouts, result size, restarts, calls at once; each default defined here once.

Why its own module: the settings (`ServerConfig`'s `mcp_*`) take their
defaults from here without importing the MCP SDK, and the composition root
(`app.py`) builds these from the settings, so the MCP layer never sees the
configuration.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class McpSettings:
    """Each field is the setting of the same name with `mcp_` before it (`call_timeout`: `mcp_call_timeout`)."""

    call_timeout: float = 30.0
    """Seconds one MCP tool call may take; past it the call is cancelled and the model sees an error result."""
    result_bytes: int = 65536
    """The largest tool result (UTF-8 bytes of its text) given to the model; a larger one becomes an error result."""
    start_timeout: float = 20.0
    """Seconds to start an MCP server (spawn or connect, handshake, tool listing)."""
    restarts: int = 3
    """Failed starts in a row an MCP server is allowed before it is given up (its calls then fail with a 503)."""
    max_calls: int = 16
    """MCP tool calls running at once over all servers; a call that waits `call_timeout` for room gets a
    `busy` error result."""
