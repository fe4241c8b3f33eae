"""One configured MCP server: a supervised SDK client, its tools, its calls and its restarts.

A supervisor task owns the SDK `Client` (its transport's task groups must be
entered and left in one task): it connects (spawning a stdio server or opening
a Streamable HTTP session), lists the tools, then watches the connection with
pings. When the server dies, the supervisor connects again; a server that cannot
be started `restarts` times in a row is given up (`failed`), and calls to it are
a 503. Calls come from request tasks, each bounded by `call_timeout`; a call
whose request goes away is cancelled, and the SDK tells the server so.

The SDK is imported where a connection first needs it, not with this module: it is some 0.4 s of every Maya
start (half of importing the app), which a server without `--mcp-config` would pay for nothing.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import McpServerGone
from .config import McpServerSpec
from .results import ToolOutcome, limited, outcome_of
from .settings import McpSettings

if TYPE_CHECKING:
    from mcp import Client

log = logging.getLogger("maya.mcp")

PING_INTERVAL_S = 2.0
"""How often a connection is checked (by listing the tools), so a dead server is restarted before a call needs it."""
LISTING_PAGES = 20
"""Pages of `tools/list` read at most: a server that paginates forever cannot hang its start."""
BACKOFF_S = (0.1, 0.5, 1.0, 2.0, 5.0)


class McpState(str, enum.Enum):
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"
    STOPPED = "stopped"


@dataclass(frozen=True)
class McpTool:
    server: str
    name: str
    description: str | None
    input_schema: dict[str, Any]


class McpConnection:
    def __init__(self, spec: McpServerSpec, settings: McpSettings) -> None:
        self.spec = spec
        self.settings = settings
        self.state = McpState.STARTING
        self.tools: tuple[McpTool, ...] = ()
        self.restarts = 0
        self.calls: dict[str, int] = {}
        self.last_error: str | None = None
        self._client: Client | None = None
        self._lost = asyncio.Event()
        self._settled = asyncio.Event()  # set whenever the state is ready or failed
        self._task: asyncio.Task | None = None

    def __repr__(self) -> str:
        return f"McpConnection({self.spec.name!r}, {self.spec.transport}, {self.state.value})"

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.spec.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.state = McpState.STOPPED
        self._settled.set()

    async def wait_settled(self, timeout: float) -> None:
        """Until the server is ready or given up, at most `timeout` seconds."""
        try:
            async with asyncio.timeout(timeout):
                await self._settled.wait()
        except TimeoutError:
            pass

    def describe(self) -> dict:
        return {
            "name": self.spec.name, "transport": self.spec.transport, "state": self.state.value,
            "restarts": self.restarts, "calls": dict(self.calls), "last_error": self.last_error,
            "tools": [{"name": t.name, "description": t.description} for t in self.tools],
        }

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run one tool; every failure but a server given up becomes an error result the model sees."""
        client, lost = await self._ready_client()
        if client is None:
            self._count("unavailable")
            return ToolOutcome(f"The MCP server {self.spec.name!r} is {self.state.value} and was not ready within "
                               f"{self.settings.start_timeout:g}s.", True)
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        started = time.monotonic()
        try:
            async with asyncio.timeout(self.settings.call_timeout):  # ours fires first: the SDK's is a second longer
                result = await client.call_tool(name, arguments, read_timeout_seconds=self.settings.call_timeout + 1)
            outcome = outcome_of(result, self.settings.result_bytes)
            self._count("error" if outcome.is_error else "ok")
            return outcome
        except TimeoutError:
            self._count("timeout")
            return ToolOutcome(f"The tool {name!r} did not finish within {self.settings.call_timeout:g}s and was cancelled.", True)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                return self._lost_during_call(name, lost)
            self._count("error")
            return limited(f"The MCP server {self.spec.name!r} refused the call: {exc.message}", True, self.settings.result_bytes)
        except Exception as exc:  # the transport broke: the server crashed or went away mid-call
            log.warning("MCP server %s failed during a call after %.1fs: %s", self.spec.name, time.monotonic() - started,
                        type(exc).__name__)
            return self._lost_during_call(name, lost)

    def _lost_during_call(self, name: str, lost: asyncio.Event) -> ToolOutcome:
        """`lost` belongs to the connection the call was made on, so a late failure never drops a newer one."""
        self._count("crashed")
        lost.set()
        return ToolOutcome(f"The MCP server {self.spec.name!r} stopped while running {name!r}; it is being restarted.", True)

    async def _ready_client(self) -> tuple[Client | None, asyncio.Event]:
        """The live client (None while a restart takes longer than `start_timeout`); a server given up raises."""
        if self.state is not McpState.READY:
            await self.wait_settled(self.settings.start_timeout)
        if self.state in (McpState.FAILED, McpState.STOPPED):
            raise McpServerGone(f"The MCP server {self.spec.name!r} is not available ({self.state.value}).")
        return self._client, self._lost

    def _count(self, outcome: str) -> None:
        self.calls[outcome] = self.calls.get(outcome, 0) + 1

    async def _supervise(self) -> None:
        failures = 0
        while True:
            was_ready = False
            try:
                async for _ in self._serve_once():
                    was_ready = True
                self.last_error = "the server stopped"
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # an exception group from the transport's task group, an OSError, ...
                self.last_error = _describe(exc)
            failures = 0 if was_ready else failures + 1  # a server that was up is worth a restart
            log.warning("MCP server %s %s: %s", self.spec.name, "stopped" if was_ready else "could not be started",
                        self.last_error)
            if failures > self.settings.restarts:
                self.state = McpState.FAILED
                self._settled.set()
                log.error("MCP server %s is given up after %d failed starts", self.spec.name, failures)
                return
            self.state, self.restarts = McpState.RESTARTING, self.restarts + 1
            await asyncio.sleep(BACKOFF_S[min(failures, len(BACKOFF_S) - 1)])

    async def _serve_once(self):
        """Connect and list the tools (yielding once when ready), then hold the connection until it is lost.

        The SDK client is entered with `async with`, so a failure inside its transport's task group arrives
        here as that failure, not as a bare cancellation."""
        from mcp import Client

        client = Client(self._target(), read_timeout_seconds=self.settings.start_timeout)
        try:
            async with AsyncExitStack() as stack:
                async with asyncio.timeout(self.settings.start_timeout):
                    await stack.enter_async_context(client)
                    self.tools = await self._list_tools(client)
                self._client, self._lost = client, asyncio.Event()
                self.state, self.last_error = McpState.READY, None
                self._settled.set()
                log.info("MCP server %s ready with %d tools", self.spec.name, len(self.tools))
                yield
                await self._watch(client)
        finally:
            self._client = None
            if self.state is McpState.READY:
                self.state = McpState.RESTARTING
                self._settled.clear()

    async def _watch(self, client: Client) -> None:
        """Until the connection is lost: a call saw it break, or the periodic tool listing fails. (The tool
        listing is the probe because MCP's ping is gone from its newer protocol versions; it also picks up
        tools the server added or removed.)"""
        while not self._lost.is_set():
            try:
                async with asyncio.timeout(PING_INTERVAL_S):
                    await self._lost.wait()
                return
            except TimeoutError:
                pass
            try:
                async with asyncio.timeout(self.settings.start_timeout):
                    self.tools = await self._list_tools(client, cache_mode="bypass")
            except asyncio.CancelledError:
                raise
            except Exception:
                return

    async def _list_tools(self, client: Client, cache_mode: str = "use") -> tuple[McpTool, ...]:
        tools, cursor = [], None
        for _ in range(LISTING_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode=cache_mode)
            tools += [McpTool(self.spec.name, t.name, t.description, t.input_schema) for t in page.tools]
            cursor = page.next_cursor
            if cursor is None:
                break
        return tuple(tools)

    def _target(self):
        from mcp import StdioServerParameters

        spec = self.spec
        if spec.command is not None:
            return StdioServerParameters(command=spec.command, args=list(spec.args), env=dict(spec.env) or None, cwd=spec.cwd)
        return _http_transport(spec)


@asynccontextmanager
async def _http_transport(spec: McpServerSpec):
    """Streamable HTTP with the configured headers, on an HTTP client closed with the connection."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=dict(spec.headers)) as http:
        async with streamable_http_client(spec.url, http_client=http) as streams:
            yield streams


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]
