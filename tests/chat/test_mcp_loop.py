"""`McpToolLoop` on its own: a scripted engine behind a real `GenerationService`, a fake MCP hub, no HTTP.

The loop is what decides which of the model's calls run on the server, what the next round is
given and when the turn ends; these tests feed it scripted rounds and assert on the events a
Chat client would be shown and on what the engine was asked next. The hub is a small stand-in
with the three things the loop and `offer_mcp_tools` use (`configured`, `tools()`, `call()`),
so each tool's answer (a result, an error result, a server gone, a call that never returns)
is the test's to choose.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from maya_server.chat.mcp_loop import McpToolLoop, offer_mcp_tools
from maya_server.neutral.conversation import Conversation, Message, TextPart, ToolSpec
from maya_server.families import get_family
from maya_server.engine.base import reusable_prefix_length
from maya_server.engine.fifo import EngineQueue
from tests.scripted import RecordingScriptedEngine
from maya_server.errors import InvalidRequestError, McpServerGone, ToolPolicyError
from maya_server.neutral.events import (
    Failed, Finished, McpRoundLimitReached, McpToolCall, McpToolResult, TextDelta, ToolCallArgumentsDelta,
    ToolCallFinished, ToolCallStarted, Usage,
)
from maya_server.pipeline.generation import GenerationService, GenerationSettings
from maya_server.mcp.connection import McpTool
from maya_server.mcp.results import ToolOutcome
from maya_server.metrics import Metrics

READ = McpTool("files", "read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
WEATHER = ToolSpec("get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}})
CONTENTS = "the contents of notes.txt"


def call(name: str, **arguments) -> str:
    """A tool call in ChatML (Hermes) syntax, as the scripted model writes it."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


class FakeHub:
    """What the loop uses of an `McpHub`. `answers` maps a tool name to its `ToolOutcome`, to an exception
    the call raises, or to an `asyncio.Event` the call waits on forever (recording its cancellation)."""

    configured = True

    def __init__(self, answers: dict, tools=(READ,)) -> None:
        self.answers = answers
        self.offered = {tool.name: tool for tool in tools}
        self.calls: list[tuple[str, str, dict]] = []
        self.cancelled = 0

    async def tools(self) -> dict[str, McpTool]:
        return dict(self.offered)

    async def call(self, tool: McpTool, arguments: dict) -> ToolOutcome:
        self.calls.append((tool.server, tool.name, arguments))
        answer = self.answers[tool.name]
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, asyncio.Event):
            answer.set()  # the call is running
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        return answer


def make_service(script) -> GenerationService:
    engine = RecordingScriptedEngine(list(script), context_size=4096)
    return GenerationService(engine, get_family("chatml"), EngineQueue(slots=1, max_queue=4), Metrics())


def conversation(*, tools=(), tool_choice="auto") -> Conversation:
    return Conversation.from_request((Message("user", (TextPart("What is in notes.txt?"),)),), tools=tuple(tools),
                                     tool_choice=tool_choice, reasoning_effort=None, parallel_tool_calls=None)


async def loop_events(service: GenerationService, hub: FakeHub, *, max_rounds: int = 4, convo=None) -> list:
    offered, tools = await offer_mcp_tools(hub, convo or conversation())
    settings = GenerationSettings()
    prepared = service.prepare(offered, settings)
    loop = McpToolLoop(service, hub, tools, max_rounds)
    return [event async for event in loop.run(prepared, settings, service.admit())]


def run_loop(script, hub: FakeHub, **options) -> tuple[list, GenerationService]:
    service = make_service(script)
    return asyncio.run(loop_events(service, hub, **options)), service


def text_of(events: list) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def completion_tokens(service: GenerationService, *scripts: str) -> int:
    return sum(len(service.engine.tokenizer.encode(s, special=True)) for s in scripts)


def test_a_turn_without_mcp_calls_passes_through_and_never_calls_the_hub():
    hub = FakeHub({"read_file": ToolOutcome(CONTENTS, False)})
    events, service = run_loop(["Nothing to read."], hub)
    assert text_of(events) == "Nothing to read."
    assert events[-1] == Finished("stop", events[-1].usage) and events[-1].usage.completion_tokens > 0
    assert hub.calls == [] and service.engine.calls == 1
    assert "read_file" in service.engine.last_prompt_text  # the hub's tool was offered to the model


def test_an_mcp_call_runs_on_its_server_and_its_result_is_the_next_rounds_input():
    first, second = call("read_file", path="notes.txt"), "It says: " + CONTENTS
    hub = FakeHub({"read_file": ToolOutcome(CONTENTS, False)})
    events, service = run_loop([first, second], hub)
    assert hub.calls == [("files", "read_file", {"path": "notes.txt"})]
    # the held-back call is never shown as a client call: it is announced, answered, then round 2 speaks
    assert not any(isinstance(e, (ToolCallStarted, ToolCallArgumentsDelta, ToolCallFinished)) for e in events)
    announced, answered = events[0], events[1]
    assert isinstance(announced, McpToolCall) and isinstance(answered, McpToolResult)
    assert (announced.round, announced.server, announced.name) == (1, "files", "read_file")
    assert json.loads(announced.arguments) == {"path": "notes.txt"}
    assert (answered.round, answered.call_id, answered.content, answered.is_error) == (
        1, announced.call_id, CONTENTS, False)
    assert text_of(events) == second and events[-1].reason == "stop"
    first_prompt, second_prompt = (service.engine.tokenizer.decode(p) for p in service.engine.prompts)
    assert CONTENTS not in first_prompt and CONTENTS in second_prompt
    assert second_prompt.startswith(first_prompt) and announced.call_id and "notes.txt" in second_prompt


def test_usage_sums_every_round():
    first, second = call("read_file", path="notes.txt"), "Done."
    hub = FakeHub({"read_file": ToolOutcome(CONTENTS, False)})
    events, service = run_loop([first, second], hub)
    usage = events[-1].usage
    prompts = list(service.engine.prompts)
    assert usage.prompt_tokens == len(prompts[0]) + len(prompts[1])
    assert usage.cached_tokens == reusable_prefix_length(list(prompts[0]), list(prompts[1])) > 0
    assert usage.completion_tokens == completion_tokens(service, first, second)


def test_past_max_rounds_the_calls_are_not_run_and_the_turn_ends_with_length():
    """The model keeps calling: round 1's call runs, round 2 asks for another round past the limit of 1."""
    again = call("read_file", path="notes.txt")
    hub = FakeHub({"read_file": ToolOutcome(CONTENTS, False)})
    events, service = run_loop([again], hub, max_rounds=1)
    assert len(hub.calls) == 1 and service.engine.calls == 2
    assert [type(e) for e in events] == [McpToolCall, McpToolResult, McpRoundLimitReached, Finished]
    assert events[2] == McpRoundLimitReached(1)
    assert events[-1].reason == "length"
    assert events[-1].usage.completion_tokens == completion_tokens(service, again, again)


def test_an_error_result_is_shown_and_given_to_the_model_which_goes_on():
    hub = FakeHub({"read_file": ToolOutcome("no such file: notes.txt", True)})
    events, service = run_loop([call("read_file", path="notes.txt"), "The file is missing."], hub)
    [result] = [e for e in events if isinstance(e, McpToolResult)]
    assert result.is_error and result.content == "no such file: notes.txt"
    assert "no such file: notes.txt" in service.engine.last_prompt_text
    assert text_of(events) == "The file is missing." and events[-1].reason == "stop"


def test_a_server_gone_fails_the_turn_with_the_usage_so_far_and_runs_no_more_rounds():
    first = call("read_file", path="notes.txt")
    gone = McpServerGone("the MCP server 'files' is gone")
    hub = FakeHub({"read_file": gone})
    events, service = run_loop([first, "never generated"], hub)
    assert [type(e) for e in events] == [McpToolCall, Failed]
    assert events[-1].error is gone
    assert events[-1].usage.completion_tokens == completion_tokens(service, first)
    assert service.engine.calls == 1 and service.queue.busy == 0


def test_a_call_to_a_function_no_one_declared_fails_the_turn_without_reaching_the_hub():
    hub = FakeHub({"read_file": ToolOutcome(CONTENTS, False)})
    events, service = run_loop([call("delete_everything")], hub)
    failure = events[-1]
    assert isinstance(failure, Failed) and isinstance(failure.error, ToolPolicyError)
    assert "delete_everything" in failure.error.message
    assert hub.calls == [] and service.engine.calls == 1


def test_a_client_tool_goes_back_to_the_client_renumbered_after_the_mcp_calls_ran():
    """The client sees only its own calls, numbered from 0, though the model's MCP call came first."""
    script = call("read_file", path="notes.txt") + "\n" + call("get_weather", city="Paris")
    hub = FakeHub({"read_file": ToolOutcome(CONTENTS, False)})
    events, service = run_loop([script, "never generated"], hub, convo=conversation(tools=[WEATHER]))
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [(e.index, e.name) for e in started] == [(0, "get_weather")]
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(e.index, json.loads(e.arguments)) for e in finished] == [(0, {"city": "Paris"})]
    assert all(e.index == 0 for e in events if isinstance(e, ToolCallArgumentsDelta))
    assert hub.calls == [("files", "read_file", {"path": "notes.txt"})]
    assert isinstance(events[-2], McpToolResult) and events[-1].reason == "tool_calls"
    assert service.engine.calls == 1  # the turn is the client's now: no second round


def test_a_malformed_call_fails_the_turn_without_reaching_the_hub():
    hub = FakeHub({"read_file": ToolOutcome(CONTENTS, False)})
    script = '<tool_call>\n{"name": "read_file", "arguments": "notes.txt"}\n</tool_call>'
    events, service = run_loop([script, "never generated"], hub)
    assert isinstance(events[-1], Failed) and isinstance(events[-1].error, ToolPolicyError)
    assert hub.calls == [] and service.engine.calls == 1


class StubService:
    """The three things the loop uses of a `GenerationService`, replaying `rounds` of events as given: for
    what no family lets through (a finished call whose arguments are not an object), and to see exactly
    which conversation each later round is prepared from."""

    def __init__(self, rounds: list[list]) -> None:
        self.rounds = list(rounds)
        self.conversations: list[Conversation] = []

    def admit(self, *, bounded: bool = True):
        return None  # only handed back to `run`

    async def run(self, prepared, admission):
        for event in self.rounds.pop(0):
            yield event

    async def prepare_async(self, conversation: Conversation, settings: GenerationSettings, **options):
        self.conversations.append(conversation)
        return SimpleNamespace(conversation=conversation)


def stub_loop(rounds: list[list], hub: FakeHub, convo: Conversation) -> tuple[list, StubService]:
    service = StubService(rounds)

    async def collect() -> list:
        loop = McpToolLoop(service, hub, await hub.tools(), 4)
        return [e async for e in loop.run(SimpleNamespace(conversation=convo), GenerationSettings(), None)]

    return asyncio.run(collect()), service


def test_arguments_that_are_not_an_object_are_an_error_result_the_model_sees_and_no_call():
    usage = Usage(10, 0, 5, 0)
    rounds = [[ToolCallStarted(0, "call_1", "read_file"), ToolCallFinished(0, "[1]"), Finished("tool_calls", usage)],
              [TextDelta("I must pass an object."), Finished("stop", usage)]]
    hub = FakeHub({"read_file": ToolOutcome(CONTENTS, False)})
    events, service = stub_loop(rounds, hub, conversation())
    [result] = [e for e in events if isinstance(e, McpToolResult)]
    assert result.is_error and "JSON object" in result.content and hub.calls == []
    [next_conversation] = service.conversations
    assistant, answer = next_conversation.turns[-2:]
    assert [(c.call_id, c.name, c.arguments) for c in assistant.tool_calls] == [("call_1", "read_file", "[1]")]
    assert answer.call_id == "call_1" and answer.content[0].text == result.content
    assert events[-1] == Finished("stop", Usage(20, 0, 10, 0))


def test_a_required_tool_choice_is_met_by_the_first_round_so_later_rounds_may_answer_in_text():
    usage = Usage(10, 0, 5, 0)
    rounds = [[ToolCallStarted(0, "call_1", "read_file"), ToolCallFinished(0, "{}"), Finished("tool_calls", usage)],
              [TextDelta("Done."), Finished("stop", usage)]]
    hub = FakeHub({"read_file": ToolOutcome(CONTENTS, False)})
    _, service = stub_loop(rounds, hub, conversation(tool_choice="required"))
    assert [c.tool_choice for c in service.conversations] == ["auto"]


def test_a_request_tool_named_like_an_mcp_tool_is_refused():
    clash = ToolSpec("read_file", parameters={"type": "object"})
    with pytest.raises(InvalidRequestError, match="read_file"):
        asyncio.run(offer_mcp_tools(FakeHub({}), conversation(tools=[clash])))


def test_a_client_leaving_during_a_call_cancels_it_and_frees_the_engine():
    async def scenario() -> None:
        running = asyncio.Event()
        hub = FakeHub({"read_file": running})
        service = make_service([call("read_file", path="notes.txt")])
        reader = asyncio.ensure_future(loop_events(service, hub))
        await running.wait()  # the loop is inside hub.call now
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
        # checked before asyncio.run's teardown, which would cancel a call left running anyway
        assert hub.cancelled == 1 and service.queue.busy == 0

    asyncio.run(scenario())
