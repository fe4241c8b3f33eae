"""A finished turn's generated ids come back with the turn: `GenerationService` with a `SpellingMemory`.

The scripted engine spells its answers as a model's sampling may (`{"pieces": [...]}`: "Hel" "lo" where the
tokenizer writes "Hello"); the tests assert on the prompt ids the engine was sent for the next turn.
"""

from __future__ import annotations

import asyncio
from array import array

from maya_server.engine.base import Finish, GeneratedToken
from maya_server.engine.fifo import EngineQueue
from maya_server.engine.scripted import ScriptTokenizer
from maya_server.families import get_family
from maya_server.metrics import Metrics
from maya_server.neutral.conversation import Conversation, ImagePart, Message, TextPart, ToolCall, ToolResult, ToolSpec
from maya_server.neutral.events import Finished, ToolCallStarted
from maya_server.pipeline.generation import GenerationService, GenerationSettings
from maya_server.pipeline.spellings import SpellingMemory, SpellingMemoryCollector, turn_key

from tests.scripted import RecordingScriptedEngine, holds_run, piece_ids

ANSWER = ["Hel", "lo", " the", "re"]
WEATHER = ToolSpec("get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}})


def service_with(script, memory: SpellingMemory | None) -> GenerationService:
    engine = RecordingScriptedEngine(list(script))
    return GenerationService(engine, get_family("chatml"), EngineQueue(slots=1, max_queue=4), Metrics(),
                             spellings=memory)


def chat(*turns, tools=()) -> Conversation:
    return Conversation.from_request(tuple(turns), tools=tools, tool_choice="auto", reasoning_effort=None,
                                     parallel_tool_calls=None)


def user(text: str) -> Message:
    return Message("user", (TextPart(text),))


def run(service: GenerationService, convo: Conversation) -> list:
    async def go():
        prepared = service.prepare(convo, GenerationSettings())
        return [event async for event in service.run(prepared, service.admit())]
    return asyncio.run(go())


def test_the_next_turn_sends_the_answer_as_the_ids_the_engine_generated():
    service = service_with([{"pieces": ANSWER}, "Fine."], SpellingMemory(1 << 20))
    engine = service.engine
    run(service, chat(user("hi")))

    run(service, chat(user("hi"), Message("assistant", (TextPart("Hello there"),)), user("and?")))

    assert holds_run(engine.prompts[1], piece_ids(engine.tokenizer, *ANSWER))
    assert service.spellings.hits == 1


def test_without_the_memory_the_answer_is_tokenized_again():
    service = service_with([{"pieces": ANSWER}, "Fine."], None)
    engine = service.engine
    run(service, chat(user("hi")))

    run(service, chat(user("hi"), Message("assistant", (TextPart("Hello there"),)), user("and?")))

    assert not holds_run(engine.prompts[1], piece_ids(engine.tokenizer, *ANSWER))


def test_a_tool_call_turn_comes_back_with_its_ids():
    pieces = ["<tool_call>", "\n", '{"na', 'me": "', "get_weather", '", "arguments": ', '{"city": "Paris"}', "}", "\n",
              "</tool_call>"]
    service = service_with([{"pieces": pieces}, "Sunny."], SpellingMemory(1 << 20))
    engine = service.engine
    events = run(service, chat(user("weather?"), tools=(WEATHER,)))
    call_id = next(e.call_id for e in events if isinstance(e, ToolCallStarted))
    history = (user("weather?"), Message("assistant", (), None, (ToolCall(call_id, "get_weather", '{"city": "Paris"}'),)),
               ToolResult(call_id, (TextPart("sunny"),)))
    run(service, chat(*history, tools=(WEATHER,)))

    assert holds_run(engine.prompts[1], piece_ids(engine.tokenizer, *pieces))


def test_stored_ids_are_never_reused_across_a_model_change():
    """Another model (here: the engine's vocabulary replaced) empties the memory: the history is tokenized in
    the new vocabulary, and none of the old model's ids reach the engine."""
    memory = SpellingMemory(1 << 20)
    service = service_with([{"pieces": ANSWER}, "Fine."], memory)
    engine = service.engine
    run(service, chat(user("hi")))
    assert len(memory) == 1

    engine.tokenizer = ScriptTokenizer()  # the model changed: its vocabulary numbers other pieces
    history = chat(user("hi"), Message("assistant", (TextPart("Hello there"),)), user("and?"))
    run(service, history)

    assert list(engine.prompts[1]) == get_family("chatml").render(history).token_ids(engine.tokenizer)
    assert memory.hits == 0 and memory.evictions == 1
    assert len(memory) == 1  # only the new model's answer ("Fine.") is kept now


def test_the_memory_keeps_to_its_bytes_dropping_the_least_recently_used():
    tokenizer = ScriptTokenizer()
    ids = array("I", range(100))
    one = len(turn_key("answer 0", [])) + ids.itemsize * len(ids)
    memory = SpellingMemory(limit_bytes=3 * (one + 300))
    for n in range(10):
        memory.remember(tokenizer, "", turn_key(f"answer {n}", []), array("I", ids))
        assert memory.size_bytes <= memory.limit_bytes

    assert 1 <= len(memory) < 10 and memory.evictions == 10 - len(memory)
    assert memory.recall(tokenizer, "", Message("assistant", (TextPart("answer 9"),))) is not None
    assert memory.recall(tokenizer, "", Message("assistant", (TextPart("answer 0"),))) is None
    samples = {s.name: s.value for family in SpellingMemoryCollector(memory).collect() for s in family.samples}
    assert samples["maya:spelling_memory_bytes"] == memory.size_bytes
    assert samples["maya:spelling_memory_entries"] == len(memory)
    assert samples["maya:spelling_memory_hits_total"] == 1 and samples["maya:spelling_memory_misses_total"] == 1


def test_only_assistant_turns_are_recalled():
    tokenizer = ScriptTokenizer()
    memory = SpellingMemory(1 << 20)
    memory.remember(tokenizer, "", turn_key("Hello there", []), array("I", [1, 2]))

    assert memory.recall(tokenizer, "", user("Hello there")) is None
    assert memory.recall(tokenizer, "", Message("assistant", (TextPart("Hello there"),))) is not None


class _TextOnlyEngine(RecordingScriptedEngine):
    """An upstream that sends text without ids (SGLang): each piece arrives with a negative id."""

    async def _stream(self, generation):
        yield GeneratedToken(-1, "Hello there")
        yield Finish("stop")


def test_a_turn_whose_ids_never_came_is_not_kept():
    memory = SpellingMemory(1 << 20)
    service = GenerationService(_TextOnlyEngine(["unused"]), get_family("chatml"), EngineQueue(slots=1, max_queue=4),
                                Metrics(), spellings=memory)

    events = run(service, chat(user("hi")))

    assert isinstance(events[-1], Finished) and len(memory) == 0


def test_a_conversation_with_images_is_tokenized_as_before():
    """An image prompt reaches llama-server as text, which it tokenizes again: ids are not spliced, and a
    generated call's control tokens are never mistaken for the client's text spelling them (a 400 there)."""
    memory = SpellingMemory(1 << 20)
    service = service_with(["Sunny."], memory)
    tokenizer = service.engine.tokenizer
    arguments = '{"city": "Paris"}'
    pieces = ["<tool_call>", "\n", '{"name": "get_weather", "arguments": ', arguments, "}", "\n", "</tool_call>"]
    memory.remember(tokenizer, "", turn_key("", [("get_weather", arguments)]), array("i", piece_ids(tokenizer, *pieces)))
    picture = ImagePart("data:image/png;base64,AAAA", data=b"\x89PNG")
    history = chat(Message("user", (TextPart("weather here?"), picture)),
                   Message("assistant", (), None, (ToolCall("call_1", "get_weather", arguments),)),
                   ToolResult("call_1", (TextPart("sunny"),)))

    prepared = service.prepare(history, GenerationSettings())

    assert prepared.prompt_ids == get_family("chatml").render(history).token_ids(tokenizer)
    assert len(prepared.images) == 1
    without_image = chat(user("weather here?"), *history.turns[1:])
    assert holds_run(service.prepare(without_image, GenerationSettings()).prompt_ids, piece_ids(tokenizer, *pieces))


def test_a_turn_is_recalled_only_in_the_cache_scope_that_generated_it():
    """One key's answer is never another key's hit: the memory is keyed by the request's cache scope."""
    tokenizer = ScriptTokenizer()
    memory = SpellingMemory(1 << 20)
    memory.remember(tokenizer, "owner-a", turn_key("Secret password is hunter2", []), array("I", [1, 2, 3]))
    answer = Message("assistant", (TextPart("Secret password is hunter2"),))

    assert memory.recall(tokenizer, "owner-b", answer) is None
    assert memory.recall(tokenizer, "", answer) is None
    assert list(memory.recall(tokenizer, "owner-a", answer)) == [1, 2, 3]
