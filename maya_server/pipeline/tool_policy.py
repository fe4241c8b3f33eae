"""The tool policy: what a generation may do with the request's tools, the same for every API.

The pipeline (`generation.py`) passes every parser event through one `ToolPolicy`
before publishing it. A call to an undeclared function, to any function when
`tool_choice` is none, or to a function other than the one `tool_choice` names
fails the generation (`ToolPolicyError`), as does tool-call syntax the parser
could not read (a call the output limit cut off is not a failure: the turn is
incomplete). `parallel_tool_calls` false ends the turn at the first complete
call; `max_tool_calls` ends it once that many calls are complete, and a call
begun past the limit is dropped with whatever follows it. A `required` or
named choice that produced no call fails the turn when it ends.
"""

from __future__ import annotations

from ..neutral.conversation import Conversation, NamedToolChoice
from ..errors import MayaError, ToolPolicyError
from ..neutral.events import ParserEvent, ToolCallFinished, ToolCallInvalid, ToolCallStarted


class ToolPolicy:
    """Checks each parser event against the request's tools, tool_choice and call limit.

    `done` means the turn is over: after the first complete call when parallel calls are off,
    after `max_calls` complete calls, or when a call beyond the limit begins (`over_limit`: that
    call and whatever follows it are dropped).
    """

    def __init__(self, conversation: Conversation, max_calls: int | None = None) -> None:
        self._conversation = conversation
        self._max_calls = max_calls
        self.over_limit = False
        choice = conversation.tool_choice
        self._named = choice.name if isinstance(choice, NamedToolChoice) else None
        self.requires_call = choice == "required" or self._named is not None
        self.calls_finished = 0
        self.done = False

    def check(self, event: ParserEvent) -> MayaError | None:
        if isinstance(event, ToolCallStarted):
            if self._max_calls is not None and self.calls_finished >= self._max_calls:
                self.over_limit = self.done = True
                return None
            return self._check_call(event.name)
        if isinstance(event, ToolCallInvalid) and event.reason != "truncated":
            return ToolPolicyError(f"the model produced an invalid tool call ({event.reason}): {event.detail}")
        if isinstance(event, ToolCallFinished):
            self.calls_finished += 1
            at_limit = self._max_calls is not None and self.calls_finished >= self._max_calls
            self.done = at_limit or not self._conversation.parallel_tool_calls
        return None

    def _check_call(self, name: str) -> MayaError | None:
        if self._conversation.tool_choice == "none":
            return ToolPolicyError(f"the model called {name!r} although tool_choice is none")
        if self._conversation.tool(name) is None:
            return ToolPolicyError(f"the model called the undeclared function {name!r}")
        if self._named is not None and name != self._named:
            return ToolPolicyError(f"the model called {name!r} although tool_choice names {self._named!r}")
        return None

