"""A real MCP server written with the official SDK, for the strata_mcp tests.

    python -P tests/mcp_tool_server.py                 # stdio
    python -P tests/mcp_tool_server.py --http PORT     # Streamable HTTP on 127.0.0.1:PORT/mcp

(`-P`: without it tests/ is first on sys.path, where tests/http hides the standard library's `http`.)

Tools: `add`, `echo`, `fail` (an error result), `slow` (sleeps; records its start and
its cancellation as files in $MCP_TEST_MARKERS), `crash` (the process dies), `big`
(a result of N bytes). With $MCP_TEST_DIE_AFTER_CRASH set, a server that crashed once
refuses to start again (a server gone for good).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("maya-test-tools")
MARKERS = Path(os.environ.get("MCP_TEST_MARKERS", "."))
CRASHED = MARKERS / "crashed"


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the given reason."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    (MARKERS / "slow-started").write_text(str(os.getpid()))
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        (MARKERS / "slow-cancelled").write_text("cancelled")
        raise
    return "slept"


@server.tool()
def crash() -> str:
    """The server process dies."""
    CRASHED.write_text("crashed")
    os._exit(1)


@server.tool()
def big(size: int) -> str:
    """A result of `size` bytes."""
    return "x" * size


if __name__ == "__main__":
    if os.environ.get("MCP_TEST_DIE_AFTER_CRASH") and CRASHED.exists():
        sys.exit(3)
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
