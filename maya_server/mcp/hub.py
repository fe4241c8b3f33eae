"""Every configured MCP server, started with the app, listed in /v1/mcp, stopped on shutdown.

The hub is what the tool loop talks to: the tools on offer (by the name the
model calls), and `call` to run one. A tool name offered by two servers goes
to the first configured; the other is listed as shadowed and never offered.
At most `max_calls` calls run at once over all servers; a call that gets no
turn within `call_timeout` is answered `busy` (an error result the model sees).
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from .config import McpServerSpec
from .connection import McpConnection, McpState, McpTool
from .settings import McpSettings
from .results import ToolOutcome


class McpHub:
    def __init__(self, specs: Sequence[McpServerSpec], settings: McpSettings) -> None:
        self.settings = settings
        self.connections = [McpConnection(spec, settings) for spec in specs]
        self._permits = asyncio.Semaphore(settings.max_calls)
        self.in_flight = 0
        self.waiting = 0
        self.busy = 0

    def __repr__(self) -> str:
        return f"McpHub({self.connections!r})"

    @property
    def configured(self) -> bool:
        return bool(self.connections)

    async def start(self) -> None:
        """Start every server and give each up to `start_timeout` to come up (a slow one goes on in the background)."""
        for connection in self.connections:
            connection.start()
        await asyncio.gather(*(c.wait_settled(self.settings.start_timeout) for c in self.connections))

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.connections))

    async def tools(self) -> dict[str, McpTool]:
        """The tools on offer, by name; servers still starting are waited for (bounded by `start_timeout`)."""
        starting = [c for c in self.connections if c.state in (McpState.STARTING, McpState.RESTARTING) and not c.tools]
        if starting:
            await asyncio.gather(*(c.wait_settled(self.settings.start_timeout) for c in starting))
        offered: dict[str, McpTool] = {}
        for connection in self.connections:
            for tool in connection.tools:
                offered.setdefault(tool.name, tool)
        return offered

    async def call(self, tool: McpTool, arguments: dict[str, Any]) -> ToolOutcome:
        """Run `tool` on its server; raises `McpServerGone` (503) only for a server given up."""
        self.waiting += 1
        try:
            async with asyncio.timeout(self.settings.call_timeout):
                await self._permits.acquire()
        except TimeoutError:
            self.busy += 1
            return ToolOutcome(f"The server runs {self.settings.max_calls} MCP calls at once and had no room for "
                               f"{tool.name!r} within {self.settings.call_timeout:g}s.", True)
        finally:
            self.waiting -= 1
        self.in_flight += 1
        try:
            return await self._connection(tool.server).call(tool.name, arguments)
        finally:
            self.in_flight -= 1
            self._permits.release()

    def _connection(self, name: str) -> McpConnection:
        return next(c for c in self.connections if c.spec.name == name)

    def summary(self) -> dict:
        """For /v1/status: each server's state and tool count, and the calls running."""
        servers = {c.spec.name: {"state": c.state.value, "tools": len(c.tools)} for c in self.connections}
        return {"servers": servers, "calls_in_flight": self.in_flight, "calls_waiting": self.waiting,
                "max_calls": self.settings.max_calls, "busy": self.busy}

    def describe(self) -> dict:
        servers = [c.describe() for c in self.connections]
        seen: dict[str, str] = {}
        for server in servers:
            for tool in server["tools"]:
                owner = seen.setdefault(tool["name"], server["name"])
                if owner != server["name"]:
                    tool["shadowed_by"] = owner
        return {"object": "list", "data": servers}


class McpCollector:
    """`maya:mcp_server_up{server}`, `maya:mcp_server_restarts_total{server}` and
    `maya:mcp_tool_calls_total{server,outcome}`, read from the hub at scrape time."""

    def __init__(self, hub: McpHub) -> None:
        self._hub = hub

    def collect(self):
        up = GaugeMetricFamily("maya:mcp_server_up", "Whether the MCP server is connected and ready", labels=["server"])
        restarts = CounterMetricFamily("maya:mcp_server_restarts", "Times the MCP server was started again", labels=["server"])
        calls = CounterMetricFamily("maya:mcp_tool_calls", "MCP tool calls by outcome", labels=["server", "outcome"])
        in_flight = GaugeMetricFamily("maya:mcp_calls_in_flight", "MCP tool calls running", value=self._hub.in_flight)
        waiting = GaugeMetricFamily("maya:mcp_calls_waiting", "MCP tool calls waiting for room", value=self._hub.waiting)
        busy = CounterMetricFamily("maya:mcp_calls_busy", "MCP tool calls refused for want of room",
                                   value=self._hub.busy)
        for connection in self._hub.connections:
            name = connection.spec.name
            up.add_metric([name], 1.0 if connection.state is McpState.READY else 0.0)
            restarts.add_metric([name], connection.restarts)
            for outcome, count in connection.calls.items():
                calls.add_metric([name, outcome], count)
        return [up, restarts, calls, in_flight, waiting, busy]
