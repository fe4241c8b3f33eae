"""What the server-side tool loop adds to a generation's events, for the Chat assembler.

A call is announced before it runs and its result follows when it is done, so a
stream shows each one as it happens. `round` counts generations from 1.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class McpToolCall:
    round: int
    call_id: str
    server: str
    name: str
    arguments: str


@dataclass(frozen=True)
class McpToolResult:
    round: int
    call_id: str
    content: str
    is_error: bool


@dataclass(frozen=True)
class McpRoundLimitReached:
    """The model asked for another round of MCP calls past `mcp_max_rounds`; they were not run."""

    max_rounds: int
