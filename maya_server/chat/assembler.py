"""Neutral pipeline events → Chat Completions chunks and the final completion object.

One assembler serves both modes: streaming sends the chunks `on_event`
returns; non-streaming ignores them and takes `completion()` at the end.

Maya's extensions ride on chunks whose delta is empty: `prompt_progress`
(llama.cpp's convention) and `strata_mcp` (a server-side MCP call or its
result); a non-streamed completion carries `strata_mcp` with every call and
result of the turn.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from ..neutral.events import (
    Failed, Finished, McpRoundLimitReached, McpToolCall, McpToolResult, PipelineEvent, PromptProgress, ReasoningDelta,
    TextDelta, ToolCallArgumentsDelta, ToolCallFinished, ToolCallStarted, Usage,
)


@dataclass
class _ToolCallState:
    """A call's arguments: the streamed deltas while it runs, the whole text once `ToolCallFinished`
    gives it (the one source of a finished call's arguments, as in the Responses assembler)."""

    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)


class ChatAssembler:
    def __init__(self, model: str, *, include_usage: bool = False, mcp: bool = False) -> None:
        """`mcp`: the request asked for `strata_mcp`, so the completion reports its server-side calls."""
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _ToolCallState] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.failure: Failed | None = None
        self._mcp: dict | None = {"calls": [], "stop_reason": None} if mcp else None

    def opening_chunk(self) -> dict:
        return self._chunk({"role": "assistant", "content": ""})

    def on_event(self, event: PipelineEvent) -> list[dict]:
        """Record the event; return the stream chunks it produces."""
        if isinstance(event, TextDelta):
            self._content.append(event.text)
            return [self._chunk({"content": event.text})] if event.text else []
        if isinstance(event, ReasoningDelta):
            self._reasoning.append(event.text)
            return [self._chunk({"reasoning_content": event.text})] if event.text else []
        if isinstance(event, ToolCallStarted):
            self._calls[event.index] = _ToolCallState(event.call_id, event.name)
            call = {"index": event.index, "id": event.call_id, "type": "function",
                    "function": {"name": event.name, "arguments": ""}}
            return [self._chunk({"tool_calls": [call]})]
        if isinstance(event, ToolCallArgumentsDelta):
            self._calls[event.index].arguments.append(event.text)
            return [self._chunk({"tool_calls": [{"index": event.index, "function": {"arguments": event.text}}]})]
        if isinstance(event, ToolCallFinished):
            self._calls[event.index].arguments = [event.arguments]
            return []
        if isinstance(event, PromptProgress):
            return [{**self._chunk({}), "prompt_progress": event.body()}]
        if isinstance(event, (McpToolCall, McpToolResult, McpRoundLimitReached)):
            return [{**self._chunk({}), "strata_mcp": self._record_mcp(event)}]
        if isinstance(event, Finished):
            return self._finish(event)
        if isinstance(event, Failed):
            self.failure = event
            self.usage = event.usage
        return []

    def _record_mcp(self, event: McpToolCall | McpToolResult | McpRoundLimitReached) -> dict:
        """The chunk's `strata_mcp` object; the same facts gather in the completion's `strata_mcp.calls`."""
        if isinstance(event, McpToolCall):
            call = {"id": event.call_id, "round": event.round, "server": event.server, "name": event.name,
                    "arguments": event.arguments}
            self._mcp["calls"].append({**call, "result": None, "is_error": None})
            return {"type": "tool_call", **call}
        if isinstance(event, McpToolResult):
            record = next(c for c in self._mcp["calls"] if c["id"] == event.call_id)
            record.update(result=event.content, is_error=event.is_error)
            return {"type": "tool_result", "id": event.call_id, "round": event.round, "result": event.content,
                    "is_error": event.is_error}
        self._mcp["stop_reason"] = "round_limit"
        return {"type": "round_limit", "max_rounds": event.max_rounds}

    def _finish(self, event: Finished) -> list[dict]:
        self.finish_reason = event.reason
        self.usage = event.usage
        chunks = [self._chunk({}, finish_reason=event.reason)]
        if self.include_usage:
            chunks.append({**self._envelope(), "choices": [], "usage": usage_body(event.usage)})
        return chunks

    def _envelope(self) -> dict:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.model, "system_fingerprint": None}

    def _chunk(self, delta: dict, finish_reason: str | None = None) -> dict:
        chunk = {**self._envelope(),
                 "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}
        if self.include_usage:
            chunk["usage"] = None
        return chunk

    def completion(self) -> dict:
        message: dict = {"role": "assistant", "content": "".join(self._content) if self._content or not self._calls else None,
                         "refusal": None}
        if self._reasoning:
            message["reasoning_content"] = "".join(self._reasoning)
        if self._calls:
            message["tool_calls"] = [
                {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": "".join(c.arguments)}}
                for _, c in sorted(self._calls.items())
            ]
        body = {
            "id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": self.finish_reason}],
            "usage": usage_body(self.usage) if self.usage else None,
        }
        if self._mcp is not None:
            body["strata_mcp"] = self._mcp
        return body


def usage_body(usage: Usage) -> dict:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }
