"""GET /v1/mcp: the configured MCP servers, their state and their tools (never a command, URL or header)."""

from __future__ import annotations

from fastapi import APIRouter

from .hub import McpHub


def mcp_router(hub: McpHub) -> APIRouter:
    router = APIRouter()

    @router.get("/v1/mcp")
    async def list_mcp_servers() -> dict:
        return hub.describe()

    return router
