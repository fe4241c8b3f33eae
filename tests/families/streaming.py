"""Driving a family's parser: whole, at every split, one character at a time."""

from __future__ import annotations

import json
from itertools import count

from maya_server.neutral.events import (
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallFinished,
    ToolCallInvalid,
    ToolCallStarted,
)


def parse(family, conversation, chunks, reason="stop") -> list:
    ids = count()
    parser = family.parser(conversation, lambda: f"call_{next(ids)}")
    events = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    events.extend(parser.finish(reason))
    check_invariants(events)
    return events


def coalesce(events) -> list:
    """Adjacent deltas of one kind (and call) merged, so different splits compare equal."""
    merged = []
    for event in events:
        last = merged[-1] if merged else None
        if isinstance(event, (TextDelta, ReasoningDelta)) and type(last) is type(event):
            merged[-1] = type(event)(last.text + event.text)
        elif isinstance(event, ToolCallArgumentsDelta) and isinstance(last, ToolCallArgumentsDelta) and last.index == event.index:
            merged[-1] = ToolCallArgumentsDelta(event.index, last.text + event.text)
        else:
            merged.append(event)
    return merged


def parse_every_way(family, conversation, output, reason="stop") -> list:
    """The coalesced events, asserted equal for every split of `output` into two pieces and per character."""
    whole = coalesce(parse(family, conversation, [output], reason))
    for cut in range(1, len(output)):
        pieces = [output[:cut], output[cut:]]
        assert coalesce(parse(family, conversation, pieces, reason)) == whole, f"split at {cut}: {pieces!r}"
    assert coalesce(parse(family, conversation, list(output), reason)) == whole, "one character at a time"
    return whole


def check_invariants(events) -> None:
    """Calls start before their deltas; a finished call's arguments are its joined deltas and a JSON object."""
    open_calls: dict[int, list[str]] = {}
    for event in events:
        if isinstance(event, (TextDelta, ReasoningDelta, ToolCallArgumentsDelta)):
            assert event.text, "empty delta"
        if isinstance(event, ToolCallStarted):
            assert event.index not in open_calls
            open_calls[event.index] = []
        elif isinstance(event, ToolCallArgumentsDelta):
            open_calls[event.index].append(event.text)
        elif isinstance(event, ToolCallFinished):
            assert "".join(open_calls.pop(event.index)) == event.arguments
            assert isinstance(json.loads(event.arguments), dict)
        elif isinstance(event, ToolCallInvalid) and event.index is not None:
            open_calls.pop(event.index)
    assert not open_calls, f"calls left open: {sorted(open_calls)}"


def calls(events) -> list[tuple[str, dict]]:
    """(name, arguments) of the finished calls."""
    names = {e.index: e.name for e in events if isinstance(e, ToolCallStarted)}
    return [(names[e.index], json.loads(e.arguments)) for e in events if isinstance(e, ToolCallFinished)]


def invalid(events) -> list[tuple[int | None, str]]:
    return [(e.index, e.reason) for e in events if isinstance(e, ToolCallInvalid)]


def text(events) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def reasoning(events) -> str:
    return "".join(e.text for e in events if isinstance(e, ReasoningDelta))
