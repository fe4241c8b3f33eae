"""The affinity table: chained prefix-block keys, which earlier prompt a new one extends, its bound, forgetting."""

from __future__ import annotations

from maya_server.engine.replicas.prefix_affinity import BLOCK_TOKENS, PrefixTable, block_keys

INSTRUCTIONS = list(range(1000, 1000 + 4 * BLOCK_TOKENS))


def conversation(seed: int, turns: int) -> list[int]:
    """Shared instructions, then `turns` blocks of this conversation's own."""
    return INSTRUCTIONS + [seed * 100 + t for t in range(turns * BLOCK_TOKENS)]


def test_keys_chain_so_a_block_stands_for_its_whole_prefix():
    a = block_keys([1] * BLOCK_TOKENS + [2] * BLOCK_TOKENS)
    b = block_keys([3] * BLOCK_TOKENS + [2] * BLOCK_TOKENS)
    assert len(a) == 2 and a[1] != b[1]          # the same second block after another first one is another prefix
    assert block_keys([1] * (BLOCK_TOKENS - 1)) == []  # a partial block has no key
    assert block_keys(list(range(40))) == block_keys(list(range(40)))


def test_a_continuation_matches_the_replica_that_was_sent_its_previous_prompt():
    table = PrefixTable(1000)
    table.sent(block_keys(conversation(1, 2)), 0)
    table.sent(block_keys(conversation(2, 2)), 1)
    assert table.matches(block_keys(conversation(1, 3)), 2) == [6, 0]
    assert table.matches(block_keys(conversation(2, 3)), 2) == [0, 6]
    assert table.matches(block_keys(conversation(1, 2)), 2) == [6, 0]  # the same prompt again (a retried turn)


def test_a_new_conversation_sharing_only_instructions_matches_nowhere():
    table = PrefixTable(1000)
    table.sent(block_keys(conversation(1, 2)), 0)
    assert table.matches(block_keys(conversation(3, 1)), 2) == [0, 0]
    assert table.matches(block_keys(list(range(5, 200))), 2) == [0, 0]
    table.sent(block_keys(conversation(1, 3)), 0)
    assert table.matches(block_keys(conversation(1, 4)), 2) == [7, 0]  # the longest earlier prompt counts
    assert (table.lookups, table.hits) == (3, 1)


def test_the_bound_holds_and_trims_prefixes_from_their_deep_end():
    table = PrefixTable(8)
    table.sent(block_keys(conversation(1, 2)), 0)   # 6 blocks, its tip at 6
    table.sent(block_keys(conversation(1, 4)), 0)   # 2 more: 8, its tip at 8
    table.sent(block_keys(conversation(2, 2)), 1)   # 2 new blocks: conversation 1's two deepest go
    assert len(table) == 8 and table.evictions == 2
    assert table.matches(block_keys(conversation(1, 5)), 2) == [6, 0]  # back to the earlier tip, still there
    assert table.matches(block_keys(conversation(2, 3)), 2) == [0, 6]


def test_a_forgotten_replica_holds_nothing_and_others_keep_theirs():
    table = PrefixTable(100)
    table.sent(block_keys(conversation(1, 2)), 0)
    table.sent(block_keys(conversation(2, 2)), 1)
    table.forget(0)
    assert table.matches(block_keys(conversation(1, 3)), 2) == [0, 0]
    assert table.matches(block_keys(conversation(2, 3)), 2) == [0, 6]
    assert len(table) == 6  # conversation 1's own blocks went; the shared ones stay for replica 1


def test_a_salt_keeps_one_keys_prefixes_from_matching_anothers():
    from maya_server.engine.replicas.prefix_affinity import block_keys

    prompt = list(range(64))
    assert block_keys(prompt, "salt-a") == block_keys(prompt, "salt-a")
    assert not set(block_keys(prompt, "salt-a")) & set(block_keys(prompt, "salt-b"))
    assert not set(block_keys(prompt, "salt-a")) & set(block_keys(prompt))
    assert block_keys(prompt, None) == block_keys(prompt)


def test_keys_are_the_same_in_every_process_salted_or_not():
    """Maya replicas share keys through Redis (`shared_affinity.py`): two processes with different string-hash
    seeds key one prompt alike, with or without a salt (Python's `hash` of a string differs between them)."""
    import os
    import subprocess
    import sys

    script = ("from maya_server.engine.replicas.prefix_affinity import block_keys; "
              "print(block_keys(list(range(64)), 'salt-a'), block_keys(list(range(64))))")
    outputs = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(outputs) == 1
