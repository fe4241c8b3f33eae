"""Pipeline events → Responses API stream events and the response object, in one place.

The assembler owns the response being built. Every event it returns is a
complete wire event (`type`, `sequence_number`, fields) and the same state
gives the final object (`snapshot()`), so the SSE stream, the JSON answer and
(later) the stored copy can never disagree. Sequence numbers are assigned
here and nowhere else, from 0: even the one event of a background response
that its own stream does not make (a reader's "you fell behind" error, written
by `responses/jobs/event_log.py`) takes its number from `reserve_sequence`.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from ...errors import MayaError
from ...neutral.conversation import PartialItem, PartialTurn
from ...neutral.events import (
    Failed, Finished, PipelineEvent, RawOutput, ReasoningDelta, ReasoningFinished, TextDelta, ToolCallArgumentsDelta,
    ToolCallFinished, ToolCallInvalid, ToolCallStarted, Usage,
)
from .envelope import response_envelope
from ..request.request import ResponsesRequest


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


@dataclass
class _Item:
    """One output item under construction: reasoning, message or function_call."""

    kind: str
    id: str
    output_index: int
    text: list[str] = field(default_factory=list)
    call_id: str = ""
    name: str = ""
    status: str = "in_progress"

    def body(self) -> dict:
        joined = "".join(self.text)
        if self.kind == "reasoning":
            return {"id": self.id, "type": "reasoning", "summary": [], "status": self.status,
                    "content": [{"type": "reasoning_text", "text": joined}] if self.status != "in_progress" else []}
        if self.kind == "message":
            content = [_output_text(joined)] if self.status != "in_progress" else []
            return {"id": self.id, "type": "message", "role": "assistant", "status": self.status, "content": content}
        return {"id": self.id, "type": "function_call", "status": self.status, "call_id": self.call_id,
                "name": self.name, "arguments": joined}


_ITEM_KINDS = {"reasoning": "reasoning", "message": "message", "function_call": "function_call"}
_DELTAS = ("response.output_text.delta", "response.reasoning_text.delta", "response.function_call_arguments.delta")


def _replay(items: list[_Item], event: dict) -> _Item | None:
    """One published event applied to the items it builds: an item opened (returned), text added, an item done."""
    kind = event["type"]
    if kind == "response.output_item.added":
        body = event["item"]
        item = _Item(_ITEM_KINDS[body["type"]], body["id"], event["output_index"],
                     call_id=body.get("call_id", ""), name=body.get("name", ""))
        items.append(item)
        return item
    if kind in _DELTAS:
        items[event["output_index"]].text.append(event["delta"])
    elif kind == "response.output_item.done":
        item = items[event["output_index"]]
        item.status = event["item"]["status"]
        if item.kind == "function_call":
            item.text = [event["item"]["arguments"]]
    return None


def published_output(events: list[dict]) -> list[dict]:
    """The output items a response's events published, each one still open closed `incomplete` with what it had
    so far: the answer of a background task that ends without an owner (`jobs/handover.ended`)."""
    items: list[_Item] = []
    for event in events:
        _replay(items, event)
    for item in items:
        if item.status == "in_progress":
            item.status = "incomplete"
    return [item.body() for item in items]


def _output_text(text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


class ResponseAssembler:
    """`on_finish`, when given, is awaited with the final snapshot of a completed or incomplete
    response before its terminal event exists (the store saves it there); if it raises a
    `MayaError` the response fails with that error instead. With it, events go through `deliver`,
    which returns a coroutine for the one event that saves (`Finished`) and a list for every other.
    `on_unsaved`, when given, is called with the response's id and `failed` or `cancelled` when it ends that
    way (so never saved)."""

    def __init__(
        self,
        request: ResponsesRequest,
        *,
        model: str,
        response_id: str | None = None,
        on_finish: Callable[[dict], Awaitable[None]] | None = None,
        on_unsaved: Callable[[str, str], None] | None = None,
    ) -> None:
        self.id = response_id or new_id("resp")
        self._on_finish = on_finish
        self._on_unsaved = on_unsaved
        self.created_at = int(time.time())
        self.status = "in_progress"
        self._envelope = response_envelope(request, model)
        self._items: list[_Item] = []
        self._open: _Item | None = None
        self._calls: dict[int, _Item] = {}
        self._sequence = 0
        self.usage: Usage | None = None
        self.error: dict | None = None
        self.incomplete_details: dict | None = None
        self.completed_at: int | None = None
        self.keeps_raw = False
        """Whether the model's own text (`RawOutput`) is kept with the events it made, for a log that lets another
        replica take the task over (`take_raw`); set by that log's maker."""
        self._raw_pending: list[tuple[str, bool]] = []
        self._raw_of_event: dict[int, list[tuple[str, bool]]] = {}
        self._raw: list[tuple[str, bool]] | None = None
        """The turn's raw text as its log holds it, once restored from a log that kept it (`partial_turn`)."""

    # -- the whole object -------------------------------------------------------------
    def snapshot(self) -> dict:
        return {
            "id": self.id, "object": "response", "created_at": self.created_at, "status": self.status,
            "completed_at": self.completed_at, "error": self.error, "incomplete_details": self.incomplete_details,
            **self._envelope,
            "output": [item.body() for item in self._items],
            "usage": _usage_body(self.usage) if self.usage else None,
        }

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "incomplete", "failed", "cancelled")

    # -- events -----------------------------------------------------------------------
    def opening(self) -> list[dict]:
        return [self._event("response.created", response=self.snapshot()),
                self._event("response.in_progress", response=self.snapshot())]

    def queued(self) -> list[dict]:
        """A background response's first events: it exists, and waits for a worker."""
        self.status = "queued"
        return [self._event("response.created", response=self.snapshot()),
                self._event("response.queued", response=self.snapshot())]

    def started(self) -> list[dict]:
        """A worker took the queued response."""
        self.status = "in_progress"
        return [self._event("response.in_progress", response=self.snapshot())]

    def cancelled(self) -> list[dict]:
        """The terminal events of a cancelled response: open items closed incomplete, then the
        standard `error` event (there is no `response.cancelled` event in the API)."""
        events = self._close_open("incomplete") + self._close_started_calls()
        self.status = "cancelled"
        self._unsaved()
        message = "The response was cancelled before it finished."
        return events + [self._event("error", code="response_cancelled", message=message, param=None)]

    def interrupted(self, error: MayaError) -> list[dict]:
        """The terminal events of a stream the server stops (it is shutting down): open items close
        incomplete, then the standard `error` event. Nothing when the response already finished."""
        if self.finished:
            return []
        events = self._close_open("incomplete") + self._close_started_calls()
        self.status = "failed"
        self.error = {"code": "server_error", "message": error.message}
        self._unsaved()
        return events + [self._event("error", code=error.code, message=error.message, param=error.param)]

    def deliver(self, event: PipelineEvent) -> list[dict] | Awaitable[list[dict]]:
        """`on_event`, except that a `Finished` event of a response to be saved is a coroutine (awaited by the
        consumer); every other event stays a plain call, so a token costs no coroutine."""
        if self._on_finish is not None and isinstance(event, Finished):
            return self._finish_saved(event)
        return self.on_event(event)

    def on_event(self, event: PipelineEvent) -> list[dict]:
        if isinstance(event, RawOutput):
            if self.keeps_raw:
                self._raw_pending.append((event.text, event.tag))
            return []
        events = self._published(event)
        if self._raw_pending and events:  # the text read so far goes with the first event it made, never before
            self._raw_of_event[events[0]["sequence_number"]] = self._raw_pending
            self._raw_pending = []
        return events

    def take_raw(self, sequence: int) -> list[tuple[str, bool]] | None:
        """The model's text read before the event numbered `sequence` was made, since the previous such event (None:
        none), once: the log that keeps it writes it with that event, so that the text in the log never runs ahead
        of the events it made (`keeps_raw`)."""
        return self._raw_of_event.pop(sequence, None)

    def _published(self, event: PipelineEvent) -> list[dict]:
        if isinstance(event, ReasoningDelta):
            return self._text_delta("reasoning", event.text)
        if isinstance(event, TextDelta):
            return self._text_delta("message", event.text)
        if isinstance(event, ReasoningFinished):
            closing = self._open is not None and self._open.kind == "reasoning"
            return self._close_open("completed") if closing else []
        if isinstance(event, ToolCallStarted):
            return self._call_started(event)
        if isinstance(event, ToolCallArgumentsDelta):
            item = self._calls[event.index]
            item.text.append(event.text)
            return [self._event("response.function_call_arguments.delta", item_id=item.id,
                                output_index=item.output_index, delta=event.text)]
        if isinstance(event, ToolCallFinished):
            return self._call_finished(event)
        if isinstance(event, ToolCallInvalid):
            return self._call_truncated(event)
        if isinstance(event, Finished):
            return self._finish(event)
        if isinstance(event, Failed):
            return self._fail(event)
        return []

    # -- a task taken over ------------------------------------------------------------
    def restore(self, snapshot: dict, events: list[dict], raw: list[list | None] | None = None) -> None:
        """Stand where a background response taken over from another replica stood: its creation time and state
        from its record's snapshot, its items (ids, text so far, which is open) from its published events. The
        log numbers what follows (`responses/jobs/redis_lua.py`), so the sequence goes on from the last event here.
        `raw`: the model's text the log kept with each event (`take_raw`), when it kept any: the turn is then
        written back from it (`partial_turn`)."""
        self.created_at = snapshot["created_at"]
        self.status = snapshot["status"]
        for event in events:
            self._replay(event)
            self._sequence = max(self._sequence, event["sequence_number"] + 1)
        if raw is not None and any(raw):
            self._raw = [(text, bool(tag)) for pieces in raw if pieces for text, tag in pieces]

    def _replay(self, event: dict) -> None:
        opened = _replay(self._items, event)
        if opened is not None:
            if opened.kind == "function_call":
                self._calls[len(self._calls)] = opened  # the parser numbers a turn's calls from 0
            else:
                self._open = opened
        elif self._open is not None and self._open.status != "in_progress":
            self._open = None  # its `done` came

    def partial_turn(self) -> PartialTurn:
        """The assistant's turn as published so far, for the model to continue."""
        kinds = {"reasoning": "reasoning", "message": "text", "function_call": "call"}
        return PartialTurn(tuple(PartialItem(kinds[item.kind], "".join(item.text), item.status != "in_progress",
                                             item.name) for item in self._items),
                           raw=tuple(self._raw) if self._raw is not None else None)

    def reserve_sequence(self) -> int:
        """A sequence number for an event outside this response's own stream (a reader's error)."""
        self._sequence += 1
        return self._sequence - 1

    def _event(self, kind: str, **fields: Any) -> dict:
        event = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event

    def _text_delta(self, kind: str, text: str) -> list[dict]:
        events: list[dict] = []
        if self._open is None or self._open.kind != kind:
            events += self._close_open("completed")
            events += self._open_item(kind)
        item = self._open
        item.text.append(text)
        name = "response.reasoning_text.delta" if kind == "reasoning" else "response.output_text.delta"
        extra = {} if kind == "reasoning" else {"logprobs": []}
        events.append(self._event(name, item_id=item.id, output_index=item.output_index, content_index=0,
                                  delta=text, **extra))
        return events

    def _open_item(self, kind: str) -> list[dict]:
        item = _Item(kind, new_id("rs" if kind == "reasoning" else "msg"), len(self._items))
        self._items.append(item)
        self._open = item
        part = {"type": "reasoning_text", "text": ""} if kind == "reasoning" else _output_text("")
        return [self._event("response.output_item.added", output_index=item.output_index, item=item.body()),
                self._event("response.content_part.added", item_id=item.id, output_index=item.output_index,
                            content_index=0, part=part)]

    def _close_open(self, status: str) -> list[dict]:
        item, self._open = self._open, None
        if item is None:
            return []
        item.status = status
        text = "".join(item.text)
        if item.kind == "reasoning":
            done = self._event("response.reasoning_text.done", item_id=item.id, output_index=item.output_index,
                               content_index=0, text=text)
            part = {"type": "reasoning_text", "text": text}
        else:
            done = self._event("response.output_text.done", item_id=item.id, output_index=item.output_index,
                               content_index=0, text=text, logprobs=[])
            part = _output_text(text)
        return [done,
                self._event("response.content_part.done", item_id=item.id, output_index=item.output_index,
                            content_index=0, part=part),
                self._event("response.output_item.done", output_index=item.output_index, item=item.body())]

    def _call_started(self, event: ToolCallStarted) -> list[dict]:
        events = self._close_open("completed")
        item = _Item("function_call", new_id("fc"), len(self._items), call_id=event.call_id, name=event.name)
        self._items.append(item)
        self._calls[event.index] = item
        return events + [self._event("response.output_item.added", output_index=item.output_index, item=item.body())]

    def _call_finished(self, event: ToolCallFinished) -> list[dict]:
        item = self._calls[event.index]
        item.text = [event.arguments]
        item.status = "completed"
        return [self._event("response.function_call_arguments.done", item_id=item.id, output_index=item.output_index,
                            name=item.name, arguments=event.arguments),
                self._event("response.output_item.done", output_index=item.output_index, item=item.body())]

    def _call_truncated(self, event: ToolCallInvalid) -> list[dict]:
        """Only truncation reaches here (the pipeline fails the rest): no arguments.done, status incomplete."""
        item = self._calls.get(event.index) if event.index is not None else None
        if item is None:
            return []
        item.status = "incomplete"
        return [self._event("response.output_item.done", output_index=item.output_index, item=item.body())]

    def _finish(self, event: Finished) -> list[dict]:
        if self._on_finish is not None:
            raise RuntimeError("a response to be saved finishes through deliver(), which awaits the save")
        return self._finishing(event) + [self._terminal()]

    async def _finish_saved(self, event: Finished) -> list[dict]:
        events = self._finishing(event)
        try:
            await self._on_finish(self.snapshot())
        except MayaError as error:
            return events + self._failure(error)
        return events + [self._terminal()]

    def _finishing(self, event: Finished) -> list[dict]:
        self.usage = event.usage
        limited = event.reason == "length"
        events = self._close_open("incomplete" if limited else "completed")
        self.completed_at = int(time.time())
        self.status = "incomplete" if limited else "completed"
        self.incomplete_details = {"reason": "max_output_tokens"} if limited else None
        return events

    def _terminal(self) -> dict:
        return self._event(f"response.{self.status}", response=self.snapshot())

    def _fail(self, event: Failed) -> list[dict]:
        self.usage = event.usage
        return self.fail(event.error)

    def _close_started_calls(self) -> list[dict]:
        """A started call that never finished is closed incomplete, without arguments.done."""
        events = []
        for item in self._calls.values():
            if item.status == "in_progress":
                item.status = "incomplete"
                events.append(self._event("response.output_item.done", output_index=item.output_index, item=item.body()))
        return events

    def _unsaved(self) -> None:
        if self._on_unsaved is not None:
            self._on_unsaved(self.id, self.status)

    def fail(self, error: MayaError) -> list[dict]:
        """Fail the response from outside the pipeline (a deadline, an event too large to keep)."""
        return self._close_open("incomplete") + self._failure(error)

    def _failure(self, error: MayaError) -> list[dict]:
        events = self._close_started_calls()
        self.status = "failed"
        self.completed_at = None
        self.incomplete_details = None
        # The response object's error.code is OpenAI's enum; Maya's specific code travels in the `error` event.
        self.error = {"code": "server_error", "message": error.message}
        self._unsaved()
        return events + [
            self._event("error", code=error.code, message=error.message, param=error.param),
            self._event("response.failed", response=self.snapshot()),
        ]


def _usage_body(usage: Usage) -> dict:
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }
