"""`SlotChooser`: the free slot sharing the longest prefix with the prompt, ties to the least recently used."""

from __future__ import annotations

import random

from maya_server.engine.upstream.slot_choice import CHUNK_BYTES, SlotChooser, SlotChooserCollector, _encode, common_prefix

INSTRUCTIONS = list(range(1000, 1600))


def test_common_prefix_finds_the_parting_id_inside_and_across_chunks():
    rng = random.Random(3)
    ids = [rng.randrange(50000) for _ in range(3 * CHUNK_BYTES // 4 + 17)]
    for cut in (0, 1, 5, CHUNK_BYTES // 4 - 1, CHUNK_BYTES // 4, CHUNK_BYTES // 4 + 1, 2 * CHUNK_BYTES // 4 + 3,
                len(ids) - 1):
        other = ids[:cut] + [ids[cut] + 1] + ids[cut + 1:]
        assert common_prefix(_encode(ids), _encode(other)) == cut
    assert common_prefix(_encode(ids), _encode(ids[:700])) == 700
    assert common_prefix(_encode(ids), _encode(ids)) == len(ids)
    assert common_prefix(b"", _encode(ids)) == 0


def test_a_continuation_goes_to_the_slot_that_holds_its_conversation():
    chooser = SlotChooser(slots=3, max_tokens=4096)
    sessions = {name: INSTRUCTIONS + [i] * 30 for i, name in enumerate("abc")}
    slots = {name: chooser.take(prompt) for name, prompt in sessions.items()}
    assert sorted(slots.values()) == [0, 1, 2]
    for name, prompt in sessions.items():
        chooser.release(slots[name], prompt + [7, 8, 9])  # prompt and generated ids
    for name in "bca":  # each continuation: its history plus a new message
        continuation = sessions[name] + [7, 8, 9, 2, 42, 43]
        slot = chooser.take(continuation)
        assert slot == slots[name]
        chooser.release(slot, continuation)
    assert chooser.choices == {"whole": 3, "prefix": 0, "lru": 3}


def test_a_slot_in_use_is_never_given_and_all_in_use_gives_none():
    chooser = SlotChooser(slots=2, max_tokens=4096)
    a = INSTRUCTIONS + [1, 2, 3]
    first = chooser.take(a)
    chooser.release(first, a)
    held = chooser.take(a + [4])
    assert held == first
    other = chooser.take(a + [4])  # the slot with a's history is busy: the other one
    assert other != first
    assert chooser.take(a) is None


def test_ties_go_to_the_least_recently_used_slot():
    chooser = SlotChooser(slots=3, max_tokens=4096)
    prompts = ([1, 2, 3], [1, 2, 4], [1, 2, 5])
    slots = [chooser.take(prompt) for prompt in prompts]
    for slot, prompt in sorted(zip(slots, prompts), reverse=True):  # slot 2 released first, slot 0 last
        chooser.release(slot, prompt)
    # all three share [1, 2] with this prompt: the one released first has waited longest
    assert chooser.take([1, 2, 9]) == 2
    assert chooser.take(None) == 1  # no ids (an image prompt): the least recently used free slot


def test_records_are_bounded_by_the_slot_context_and_counted():
    chooser = SlotChooser(slots=2, max_tokens=100)
    slot = chooser.take(list(range(500)))
    chooser.release(slot, list(range(500)))
    assert chooser.held(slot) == list(range(100))
    metrics = {m.name: m for m in SlotChooserCollector(chooser).collect()}
    assert metrics["maya:engine_slot_record_tokens"].samples[0].value == 100
    chooser.release(slot, None)  # unknown contents (a failed request): nothing is claimed
    assert chooser.recorded_tokens == 0


def test_a_salted_prompt_takes_its_own_or_an_empty_slot_before_another_salts():
    """Caches isolated per key: another key's slot never counts as sharing, and is taken only when no other is
    free; `reuses` then tells the engine to evaluate the whole prompt."""
    chooser = SlotChooser(3, 1000)
    prompt = list(range(50))
    for slot in range(2):
        assert chooser.take(prompt, "a") == slot
    chooser.release(0, prompt, "a")
    chooser.release(1, prompt, "a")

    taken = chooser.take(prompt, "b")
    assert taken == 2 and chooser.reuses(taken, "b")   # the empty slot, not the one sharing the whole prompt
    second = chooser.take(prompt, "b")
    assert not chooser.reuses(second, "b") and chooser.reuses(second, "a")
    assert chooser.choices["whole"] == 0 and chooser.reused_tokens == 0  # nothing counted as shared across keys
    chooser.release(second, prompt, "b")
    assert chooser.reuses(second, "b") and not chooser.reuses(second, "a")  # what it holds now is b's


def test_without_a_salt_every_slot_is_shared():
    chooser = SlotChooser(2, 1000)
    chooser.take([1, 2, 3], "a")
    chooser.release(0, [1, 2, 3], "a")

    assert chooser.take([1, 2, 3, 4], None) == 0 and chooser.reuses(0, None)
