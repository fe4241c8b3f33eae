"""Validate before publishing: structured output and strict tools.

When the request asks for JSON output (`text.format` json_object/json_schema)
or declares a `strict` tool, no generated event may reach the client before
the whole result is known valid. The gate holds every generated event (within
a 4 MiB estimated budget) until the generation finishes, then either releases
them all followed by the finish, or replaces them with one `Failed` carrying
the consumed usage. An output-limited generation releases nothing: an
incomplete result with no unvalidated content. No retries are attempted.

Validation runs inside `feed`, in one step of the event loop, so no cancel can
land while it runs; each validation is bounded by the validator's own time
budget instead.
"""

from __future__ import annotations

from typing import AsyncIterator

from ..errors import StructuredOutputError
from ..neutral.conversation import Conversation
from ..neutral.events import Failed, Finished, PipelineEvent, RawOutput, TextDelta, ToolCallFinished, ToolCallStarted
from .formats import OutputFormat
from .validator import MAX_OUTPUT_BYTES, StructuredValidator

EVENT_OVERHEAD_BYTES = 64
"""Estimated cost of holding one event object, beyond its text."""


def publish_gate(conversation: Conversation, output_format: OutputFormat) -> PublishGate:
    """The one gate both APIs build, from the neutral conversation: the output format's validator for the text,
    and one for each `strict` tool it declares (a tool `tool_choice:"none"` hid cannot be called, so needs none)."""
    tools = {tool.name: StructuredValidator(tool.parameters) for tool in conversation.tools if tool.strict}
    return PublishGate(StructuredValidator.for_format(output_format), tools)


class PublishGate:
    def __init__(
        self,
        text_validator: StructuredValidator | None,
        tool_validators: dict[str, StructuredValidator],
        *,
        budget_bytes: int = MAX_OUTPUT_BYTES,
    ) -> None:
        self._text = text_validator
        self._tools = tool_validators
        self._budget = budget_bytes
        self._held: list[PipelineEvent] = []
        self._held_bytes = 0
        self._call_names: dict[int, str] = {}
        self._overflowed = False

    @property
    def active(self) -> bool:
        return self._text is not None or bool(self._tools)

    def feed(self, event: PipelineEvent) -> list[PipelineEvent]:
        """Events safe to publish now (none while a generation is being held)."""
        if not self.active:
            return [event]
        if isinstance(event, Finished):
            return self._release(event)
        if isinstance(event, (Failed, RawOutput)):  # the model's text publishes nothing: the log keeps it with the
            return [event]                           # first event released after it, and it costs no budget here
        if self._overflowed:
            return []
        self._hold(event)
        return []

    def _hold(self, event: PipelineEvent) -> None:
        if isinstance(event, ToolCallStarted):
            self._call_names[event.index] = event.name
        self._held.append(event)
        self._held_bytes += EVENT_OVERHEAD_BYTES + len(getattr(event, "text", "") or getattr(event, "arguments", "")) * 4
        if self._held_bytes > self._budget:
            self._overflowed = True

    def _release(self, finished: Finished) -> list[PipelineEvent]:
        if finished.reason == "length":
            return [finished]
        if self._overflowed:
            return [self._fail(f"the output exceeds the {self._budget}-byte structured-output buffer", finished)]
        reason = self._first_violation()
        if reason is not None:
            return [self._fail(reason, finished)]
        return self._held + [finished]

    def _first_violation(self) -> str | None:
        if self._text is not None:
            text = "".join(e.text for e in self._held if isinstance(e, TextDelta))
            verdict = self._text.validate(text)
            if not verdict.ok:
                return f"the output is not valid for text.format: {verdict.reason}"
        for event in self._held:
            if isinstance(event, ToolCallFinished):
                name = self._call_names.get(event.index, "")
                validator = self._tools.get(name)
                verdict = validator.validate(event.arguments) if validator else None
                if verdict is not None and not verdict.ok:
                    return f"the arguments of the strict function {name!r} are invalid: {verdict.reason}"
        return None

    @staticmethod
    def _fail(reason: str, finished: Finished) -> Failed:
        return Failed(StructuredOutputError(reason), finished.usage)


def gated(events: AsyncIterator[PipelineEvent], gate: PublishGate) -> AsyncIterator[PipelineEvent]:
    """`events` through `gate`; closing this closes `events` (which stops the engine). An inactive gate
    passes every event as it comes, so its events are `events` themselves: no per-token hop."""
    return _through(events, gate) if gate.active else events


async def _through(events: AsyncIterator[PipelineEvent], gate: PublishGate) -> AsyncIterator[PipelineEvent]:
    try:
        async for event in events:
            for released in gate.feed(event):
                yield released
    finally:
        await events.aclose()
