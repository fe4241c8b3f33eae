"""The server-side tool loop of `strata_mcp`: generate, run the model's MCP calls, generate again.

    round 1: the conversation + the MCP tools ─► GenerationService.run ─► events
      text and reasoning pass through; a call to a client tool passes through (renumbered
      from 0, as the client sees only its own calls); a call to an MCP tool is held back,
      then announced (`McpToolCall`), run on its server and answered (`McpToolResult`)
    round n+1: the conversation + that assistant turn and its tool results ─► run again

The turn ends when a round makes no MCP call (its own finish), when it calls a
client tool (back to the client, `tool_calls`, after its MCP calls have run), or
when the model asks for more than `max_rounds` rounds of MCP calls
(`McpRoundLimitReached`, then `length`: the turn's budget ran out, as with
`max_tokens`). Usage sums every round. A client that goes away cancels the
iteration, and with it the engine or the MCP call in flight.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import AsyncIterator, Mapping

import orjson

from ..neutral.conversation import Conversation, Message, TextPart, ToolCall, ToolResult, ToolSpec
from ..errors import InvalidRequestError, MayaError
from ..engine.fifo import Admission
from ..neutral.events import (
    Failed, Finished, LoopEvent, McpRoundLimitReached, McpToolCall, McpToolResult, PipelineEvent, ReasoningDelta,
    TextDelta, ToolCallArgumentsDelta, ToolCallFinished, ToolCallInvalid, ToolCallStarted, Usage,
)
from ..pipeline.cache_scope import SHARED_SCOPE
from ..pipeline.generation import GenerationService, GenerationSettings, PreparedGeneration
from ..mcp.connection import McpTool
from ..mcp.hub import McpHub
from ..mcp.results import ToolOutcome


async def offer_mcp_tools(hub: McpHub, conversation: Conversation) -> tuple[Conversation, dict[str, McpTool]]:
    """The conversation with the hub's tools beside the request's own (400 on a name clash)."""
    if not hub.configured:
        raise InvalidRequestError("strata_mcp: this server has no MCP servers configured.", param="strata_mcp")
    tools = await hub.tools()
    for i, own in enumerate(conversation.tools):
        if own.name in tools:
            raise InvalidRequestError(
                f"The function name {own.name!r} is also an MCP tool of this server (strata_mcp); rename it.",
                param=f"tools[{i}].function.name",
            )
    if conversation.tool_choice == "none":
        return conversation, tools  # no tool is shown to the model, so none can be called
    specs = tuple(ToolSpec(t.name, t.description, t.input_schema) for t in tools.values())
    return replace(conversation, tools=conversation.tools + specs), tools


@dataclass
class _Call:
    call_id: str
    name: str
    tool: McpTool | None
    client_index: int | None
    arguments: str = ""


@dataclass
class _Round:
    """One generation's events, split into what the client sees and the MCP calls held back."""

    tools: Mapping[str, McpTool]
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    client_calls: int = 0

    def feed(self, event: PipelineEvent) -> list[PipelineEvent]:
        if isinstance(event, TextDelta):
            self.text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            self.reasoning.append(event.text)
        elif isinstance(event, ToolCallStarted):
            return self._started(event)
        elif isinstance(event, (ToolCallArgumentsDelta, ToolCallFinished, ToolCallInvalid)):
            return self._renumbered(event)
        return [event]

    def _started(self, event: ToolCallStarted) -> list[PipelineEvent]:
        tool = self.tools.get(event.name)
        client_index = None if tool is not None else self.client_calls
        self.client_calls += tool is None
        self.calls[event.index] = _Call(event.call_id, event.name, tool, client_index)
        return [] if tool is not None else [replace(event, index=client_index)]

    def _renumbered(self, event) -> list[PipelineEvent]:
        call = self.calls.get(event.index)  # None for an event of no started call (index None included)
        if call is None:
            return [event]
        if isinstance(event, ToolCallFinished):
            call.arguments = event.arguments
        return [] if call.tool is not None else [replace(event, index=call.client_index)]

    @property
    def mcp_calls(self) -> list[_Call]:
        return [c for _, c in sorted(self.calls.items()) if c.tool is not None]

    def turns(self, outcomes: list[ToolOutcome]) -> tuple:
        """This round as history: the assistant's text and MCP calls, then each call's result."""
        text = "".join(self.text)
        mcp_calls = self.mcp_calls
        calls = tuple(ToolCall(c.call_id, c.name, c.arguments) for c in mcp_calls)
        assistant = Message("assistant", (TextPart(text),) if text else (), "".join(self.reasoning) or None, calls)
        results = tuple(ToolResult(c.call_id, (TextPart(o.content),), c.name) for c, o in zip(mcp_calls, outcomes))
        return (assistant, *results)


class McpToolLoop:
    def __init__(self, service: GenerationService, hub: McpHub, tools: Mapping[str, McpTool], max_rounds: int, *,
                 owner: str = SHARED_SCOPE) -> None:
        """`owner`: the request's owner scope, whose caches each later round's prompt is prepared in."""
        self.service = service
        self.hub = hub
        self.tools = tools
        self.max_rounds = max_rounds
        self.owner = owner

    async def run(self, prepared: PreparedGeneration, settings: GenerationSettings,
                  admission: Admission) -> AsyncIterator[LoopEvent]:
        """`admission` is the first round's place in the engine queue (the route's 429 check); later
        rounds of an admitted request wait for the engine however full its queue is."""
        usage = Usage(0, 0, 0, 0)
        for round_number in range(1, self.max_rounds + 2):
            current = _Round(self.tools)
            finished: Finished | None = None
            if round_number > 1:
                admission = self.service.admit(bounded=False)
            async for event in self.service.run(prepared, admission):
                if isinstance(event, Failed):
                    yield Failed(event.error, _sum(usage, event.usage))
                    return
                if isinstance(event, Finished):
                    finished = event
                    continue
                for shown in current.feed(event):
                    yield shown
            usage = _sum(usage, finished.usage)
            calls = current.mcp_calls if finished.reason == "tool_calls" else []
            if not calls:
                yield Finished(finished.reason, usage)
                return
            if round_number > self.max_rounds:
                yield McpRoundLimitReached(self.max_rounds)
                yield Finished("length", usage)
                return
            outcomes = []
            for call in calls:
                yield McpToolCall(round_number, call.call_id, call.tool.server, call.name, call.arguments)
                try:
                    outcome = await self._run(call)
                except MayaError as exc:  # the server is gone for good
                    yield Failed(exc, usage)
                    return
                outcomes.append(outcome)
                yield McpToolResult(round_number, call.call_id, outcome.content, outcome.is_error)
            if current.client_calls:
                yield Finished("tool_calls", usage)  # the client's calls end the turn, as without MCP
                return
            try:
                prepared = await self.service.prepare_async(
                    _continued(prepared.conversation, current.turns(outcomes)), settings, owner=self.owner)
            except MayaError as exc:  # e.g. the results no longer fit the context
                yield Failed(exc, usage)
                return

    async def _run(self, call: _Call) -> ToolOutcome:
        try:
            arguments = orjson.loads(call.arguments or "{}")
        except orjson.JSONDecodeError:
            arguments = None
        if not isinstance(arguments, dict):
            return ToolOutcome("The tool call's arguments must be a JSON object.", True)
        return await self.hub.call(call.tool, arguments)


def _continued(conversation: Conversation, turns: tuple) -> Conversation:
    """The next round's conversation: a required call was made, so later rounds may answer in text."""
    choice = "auto" if conversation.tool_choice == "required" else conversation.tool_choice
    return replace(conversation, turns=conversation.turns + turns, tool_choice=choice)


def _sum(a: Usage, b: Usage) -> Usage:
    return Usage(a.prompt_tokens + b.prompt_tokens, a.cached_tokens + b.cached_tokens,
                 a.completion_tokens + b.completion_tokens, a.reasoning_tokens + b.reasoning_tokens)
