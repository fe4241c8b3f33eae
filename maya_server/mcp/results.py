"""An MCP `CallToolResult` → the text the model sees, within the result-size limit.

Text blocks are joined; structured content without text is its JSON; other
blocks (images, audio, resources) are named, since the families take text tool
results. A result larger than the limit becomes an error result saying so,
never a silently shortened one.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson


@dataclass(frozen=True)
class ToolOutcome:
    content: str
    is_error: bool


def outcome_of(result, limit_bytes: int) -> ToolOutcome:
    """`result` is the SDK's CallToolResult."""
    parts = [_block_text(block) for block in result.content or ()]
    if not any(parts) and result.structured_content is not None:
        parts = [orjson.dumps(result.structured_content).decode()]
    return limited("\n".join(p for p in parts if p), bool(result.is_error), limit_bytes)


def limited(content: str, is_error: bool, limit_bytes: int) -> ToolOutcome:
    size = len(content.encode("utf-8"))
    if size > limit_bytes:
        return ToolOutcome(f"The tool's result ({size} bytes) is larger than the server's limit of {limit_bytes} bytes.", True)
    return ToolOutcome(content, is_error)


def _block_text(block) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        return f"[{kind} {getattr(block, 'mime_type', '')}]".replace(" ]", "]")
    if kind == "resource_link":
        return f"[resource {block.uri}]"
    if kind == "resource":
        text = getattr(block.resource, "text", None)
        return text if isinstance(text, str) else f"[resource {block.resource.uri}]"
    return f"[{kind}]"
