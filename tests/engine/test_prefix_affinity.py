"""The affinity table: chained prefix-block keys, per-replica match depths, its bound and what it forgets."""

from __future__ import annotations

from maya_server.engine.prefix_affinity import BLOCK_TOKENS, PrefixTable, block_keys

INSTRUCTIONS = list(range(1000, 1000 + 4 * BLOCK_TOKENS))


def conversation(seed: int, turns: int) -> list[int]:
    return INSTRUCTIONS + [seed * 100 + t for t in range(turns * BLOCK_TOKENS)]


def test_keys_chain_so_a_block_stands_for_its_whole_prefix():
    a = block_keys([1] * BLOCK_TOKENS + [2] * BLOCK_TOKENS)
    b = block_keys([3] * BLOCK_TOKENS + [2] * BLOCK_TOKENS)
    assert len(a) == 2 and a[1] != b[1]          # the same second block after another first one is another prefix
    assert block_keys([1] * (BLOCK_TOKENS - 1)) == []  # a partial block has no key
    assert block_keys(list(range(40))) == block_keys(list(range(40)))


def test_a_continuation_matches_the_replica_that_was_sent_its_history():
    table = PrefixTable(1000)
    table.sent(block_keys(conversation(1, 2)), 0)
    table.sent(block_keys(conversation(2, 2)), 1)
    assert table.matches(block_keys(conversation(1, 3)), 2) == [6, 4]  # both hold the instructions, 0 the history
    assert table.matches(block_keys(conversation(2, 3)), 2) == [4, 6]
    assert table.matches(block_keys(conversation(3, 1)), 2) == [4, 4]  # a new conversation: a tie
    assert table.matches(block_keys(list(range(5, 200))), 2) == [0, 0]
    assert (table.lookups, table.hits) == (4, 3)


def test_the_bound_holds_and_trims_prefixes_from_their_deep_end():
    table = PrefixTable(8)
    table.sent(block_keys(conversation(1, 4)), 0)   # 8 blocks
    table.sent(block_keys(conversation(2, 2)), 1)   # 2 new blocks: two of conversation 1's go
    assert len(table) == 8 and table.evictions == 2
    assert table.matches(block_keys(conversation(1, 4)), 2) == [6, 4]  # its shallow blocks stayed


def test_a_forgotten_replica_holds_nothing_and_others_keep_theirs():
    table = PrefixTable(100)
    table.sent(block_keys(conversation(1, 2)), 0)
    table.sent(block_keys(conversation(2, 2)), 1)
    table.forget(0)
    assert table.matches(block_keys(conversation(1, 2)), 2) == [0, 4]
    assert len(table) == 6  # conversation 1's own blocks went; the shared ones stay for replica 1
