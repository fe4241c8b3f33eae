"""A continuation reuses every token the engine already evaluated, with the real embedded engine (SmolLM2).

Two conversations share long instructions on a server with two slots: the second runs in the slot
the first used (the instructions are already there), so the first's state is only in llama-server's
RAM prompt cache when it continues. Maya sends it to a slot chosen by shared prefix, and the child
restores the conversation's own state before evaluating (`slot_choice.py`): the continuation's cached
tokens are the whole previous prompt and answer (all but the last generated token, which llama-server
never evaluates), not just the instructions.
"""

from __future__ import annotations

import pytest

from tests.embedded import embedded_server

pytestmark = pytest.mark.slow

INSTRUCTIONS = " ".join(f"Rule {i}: keep every answer short, precise and polite." for i in range(40))
ANSWER_TOKENS = 12


@pytest.fixture(scope="module")
def smollm():
    with embedded_server(ctx=2048, slots=2, cache_ram_mib=256) as server:
        yield server


def say(client, messages: list[dict]):
    completion = client.chat.completions.create(model="m", messages=messages, temperature=0, max_tokens=ANSWER_TOKENS)
    messages.append({"role": "assistant", "content": completion.choices[0].message.content})
    return completion.usage


def test_a_chat_continuation_gets_its_whole_history_from_cache_after_another_session_ran(smollm):
    client = smollm.client()
    a = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": "Name a colour."}]
    b = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": "Name an animal."}]
    first = say(client, a)
    say(client, b)
    a.append({"role": "user", "content": "And another one?"})
    continuation = say(client, a)
    instructions_only = first.prompt_tokens - 10  # what sharing the instructions alone would give
    # llama-server never evaluates the last token it generates (or the end-of-turn token it stopped on)
    assert continuation.prompt_tokens_details.cached_tokens >= first.prompt_tokens + first.completion_tokens - 1
    assert continuation.prompt_tokens_details.cached_tokens > instructions_only


def test_a_stored_continuation_is_id_for_id_the_previous_prompt_and_answer(smollm):
    """With `previous_response_id` Maya rebuilds the history; the slot's record of what the engine holds (the
    previous prompt and generated ids) is then wholly a prefix of the new prompt."""
    client, chooser = smollm.client(), smollm.engine.slot_chooser
    first = client.responses.create(model="m", instructions=INSTRUCTIONS, input="Name a fruit.", temperature=0, store=True,
                                    max_output_tokens=16)
    whole = chooser.choices["whole"]
    second = client.responses.create(model="m", instructions=INSTRUCTIONS, input="And another?", temperature=0,
                                     max_output_tokens=16, previous_response_id=first.id)
    assert chooser.choices["whole"] == whole + 1
    usage = first.usage
    assert second.usage.input_tokens_details.cached_tokens >= usage.input_tokens + usage.output_tokens - 1
