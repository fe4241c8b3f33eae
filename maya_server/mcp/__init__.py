"""Server-side tools over the Model Context Protocol (the `strata_mcp` Chat Completions extension).

    config.py      the operator's `mcpServers` (stdio or Streamable HTTP) → `McpServerSpec`s
    connection.py  one server: its supervised SDK client, its tools, its calls, its restarts
    hub.py         every configured server, started with the app and stopped on shutdown
    results.py     an MCP tool result → the text the model sees
    routes.py      GET /v1/mcp

The loop itself (generate, run the calls, generate again) is `chat/mcp_loop.py`; the events it adds to a
generation's (`McpToolCall`, `McpToolResult`, `McpRoundLimitReached`) are in `events.py` with the others.
"""
