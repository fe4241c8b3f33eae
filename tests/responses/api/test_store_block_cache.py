"""Through HTTP, a Maya on a real Redis with its replica-local block cache (`store/block_cache.py`): a continuation
takes from the cache the blocks this replica holds and the rest from Redis, with the same prompt either way; a
block Redis lost is still a 404 `stored_response_lost` (DEL by hand), and a flushed Redis still a 404 `not_found`,
exactly as with the cache off; two API keys never share a cached block. Skipped, saying why, where redis-server
is not installed."""

from __future__ import annotations

import openai
import pytest

from maya_server.http.auth import owner_of

from tests.redis_server import RedisServer, command
from tests.responses.api.test_input_conversion import chatml
from tests.responses.store_backends import shared_redis, store_stats, unique_prefix
from tests.server import prometheus_values

DEFAULT = 64 * 1024 * 1024


def chain(client, turns: int, prefix: str = "turn") -> tuple[list[str], list[tuple[str, str]]]:
    ids, said = [], []
    for n in range(turns):
        reply = client.responses.create(model="m", input=f"{prefix} {n}", store=True,
                                        previous_response_id=ids[-1] if ids else None)
        ids.append(reply.id)
        said += [("user", f"{prefix} {n}"), ("assistant", reply.output_text)]
    return ids, said


def cache_of(server) -> dict:
    return store_stats(server)["block_cache"]


def test_a_continuation_takes_what_the_replica_holds_and_fetches_the_rest(start_server):
    url, prefix = shared_redis().url, unique_prefix()
    writer = start_server([f"Answer {n}." for n in range(4)] + ["More."] * 8, store=url, store_prefix=prefix)
    ids, said = chain(writer.client(), 4)
    held = cache_of(writer)
    assert held["blocks"] == 8 and held["misses"] == 0  # 4 turns' items (an envelope is never fetched whole)
    before_hits = held["hits"]
    writer.client().responses.create(model="m", previous_response_id=ids[-1], input="go on")
    assert writer.engine.last_prompt_text == chatml(*said, ("user", "go on"))
    after = cache_of(writer)
    assert after["hits"] - before_hits == 8 and after["misses"] == 0  # its own blocks, none sent by Redis

    reader = start_server(["More."] * 8, store=url, store_prefix=prefix)  # another replica: holds nothing yet
    for round_ in range(2):
        reader.client().responses.create(model="m", previous_response_id=ids[-1], input="go on")
        assert reader.engine.last_prompt_text == chatml(*said, ("user", "go on"))
    cache = cache_of(reader)
    assert (cache["misses"], cache["hits"]) == (8, 8)  # fetched once, then held
    with reader.http() as http:
        metrics = prometheus_values(http.get("/metrics/prometheus").text, "maya:responses_cache_block_cache_")
    assert metrics["maya:responses_cache_block_cache_hits_total"] == 8
    assert metrics["maya:responses_cache_block_cache_misses_total"] == 8
    assert metrics["maya:responses_cache_block_cache_limit_bytes"] == DEFAULT
    assert metrics["maya:responses_cache_block_cache_bytes"] == cache["bytes"] > 0
    status = reader.client().get("/status", cast_to=object)
    assert status["responses"]["cache"]["block_cache"]["blocks"] == cache["blocks"]


def test_a_cache_of_zero_holds_nothing_and_answers_the_same(start_server):
    url, prefix = shared_redis().url, unique_prefix()
    server = start_server([f"Answer {n}." for n in range(3)] + ["More."], store=url, store_prefix=prefix,
                          store_block_cache_bytes=0)
    ids, said = chain(server.client(), 3)
    server.client().responses.create(model="m", previous_response_id=ids[-1], input="go on")
    assert server.engine.last_prompt_text == chatml(*said, ("user", "go on"))
    cache = cache_of(server)
    assert (cache["blocks"], cache["bytes"], cache["hits"], cache["misses"]) == (0, 0, 0, 2 + 4 + 6)  # every block of every continuation fetched


@pytest.mark.parametrize("cache_bytes", [DEFAULT, 0])
@pytest.mark.parametrize("loss", ["block", "flushall"])
def test_what_redis_lost_is_reported_lost_whether_or_not_the_replica_holds_it(start_server, loss, cache_bytes):
    """The block is in this replica's cache (it wrote it); Redis's copy is gone: the continuation is the 404 it
    is without the cache, nothing is generated, and the broken entry is gone for every later read."""
    redis = RedisServer()
    try:
        prefix = unique_prefix()
        server = start_server(["Kept-0.", "Kept-1.", "Kept-2.", "unused"], store=redis.url, store_prefix=prefix,
                              store_block_cache_bytes=cache_bytes)
        client = server.client()
        ids, _ = chain(client, 3)
        assert cache_of(server)["blocks"] == (0 if cache_bytes == 0 else 6)
        if loss == "block":
            [key] = [key for key in command(redis.url, "KEYS", prefix + "b:*")
                     if b"Kept-1." in command(redis.url, "GET", key)]
            assert command(redis.url, "DEL", key) == 1
        else:
            command(redis.url, "FLUSHALL")
        calls = server.engine.calls
        with pytest.raises(openai.NotFoundError) as caught:
            client.responses.create(model="m", previous_response_id=ids[-1], input="go on")
        expected = "stored_response_lost" if loss == "block" else "not_found"
        assert (caught.value.body["code"], caught.value.body["param"]) == (expected, "previous_response_id")
        assert server.engine.calls == calls
        with pytest.raises(openai.NotFoundError) as again:  # removed: an ordinary 404 from now on
            client.responses.create(model="m", previous_response_id=ids[-1], input="go on")
        assert again.value.body["code"] == "not_found"
        if loss == "block":
            assert store_stats(server)["lost"] >= 1  # (the probe's recount may find turn 1 broken too)
    finally:
        redis.stop()


def test_two_api_keys_never_share_a_cached_block(start_server):
    url, prefix = shared_redis().url, unique_prefix()
    server = start_server(["Same answer."] * 2 + ["More."] * 4, store=url, store_prefix=prefix,
                          api_keys=("key-a", "key-b"))
    clients = {key: server.client(api_key=key) for key in ("key-a", "key-b")}
    firsts = {key: client.responses.create(model="m", input=[{"type": "message", "role": "user", "id": "msg_same",
                                                              "content": "the same words"}], store=True)
              for key, client in clients.items()}
    cache = cache_of(server)
    assert cache["blocks"] == 2 * 2  # the same two blocks (input, output), once per key
    scope_a = server.await_on_loop(lambda: server.app.state.store.link.scope(owner_of("key-a")))
    [key] = [key for key in command(url, "KEYS", f"{prefix}b:*")
             if b"the same words" in command(url, "GET", key) and scope_a.encode() in key]
    assert command(url, "DEL", key) == 1  # key A's copy only
    with pytest.raises(openai.NotFoundError) as caught:
        clients["key-a"].responses.create(model="m", previous_response_id=firsts["key-a"].id, input="go on")
    assert caught.value.body["code"] == "stored_response_lost"
    reply = clients["key-b"].responses.create(model="m", previous_response_id=firsts["key-b"].id, input="go on")
    assert reply.status == "completed"
    assert server.engine.last_prompt_text == chatml(("user", "the same words"), ("assistant", "Same answer."),
                                                    ("user", "go on"))
    with pytest.raises(openai.NotFoundError):  # neither key sees the other's responses, cached or not
        clients["key-b"].responses.create(model="m", previous_response_id=firsts["key-a"].id, input="go on")


def count_reads(server) -> list[int]:
    """A counter of the store's READ scripts (each one round trip), bumped on the server's loop."""
    store, calls = server.app.state.store, [0]
    read = store._scripts["READ"]

    def counted(args):
        calls[0] += 1
        return read(args)

    store._scripts["READ"] = counted
    return calls


def test_replicas_taking_turns_each_fetch_only_the_others_turns_in_one_round_trip(start_server):
    """Round robin over two replicas: each continuation sends only the blocks the other replica wrote since this one
    last saw the conversation (its lineage hint), in the one script that checks the whole history."""
    url, prefix = shared_redis().url, unique_prefix()
    replicas = [start_server([f"From {name} {n}." for n in range(6)], store=url, store_prefix=prefix)
                for name in ("a", "b")]
    reads = [count_reads(server) for server in replicas]
    ids, said = [], []
    for turn in range(6):
        server = replicas[turn % 2]
        before = cache_of(server)
        reads_before = reads[turn % 2][0]
        reply = server.client().responses.create(model="m", input=f"turn {turn}", store=True,
                                                 previous_response_id=ids[-1] if ids else None)
        assert server.engine.last_prompt_text == chatml(*said, ("user", f"turn {turn}"))
        ids.append(reply.id)
        said += [("user", f"turn {turn}"), ("assistant", reply.output_text)]
        after = cache_of(server)
        fetched, taken = after["misses"] - before["misses"], after["hits"] - before["hits"]
        if turn == 0:
            continue
        assert reads[turn % 2][0] - reads_before == 1  # one script, whatever this replica lacked
        if turn == 1:
            assert (fetched, taken) == (2, 0)  # b never saw the conversation
        else:
            assert (fetched, taken) == (2, 2 * (turn - 1))  # only the other replica's last turn


def test_a_hinted_block_evicted_here_is_fetched_by_a_second_read(start_server):
    url, prefix = shared_redis().url, unique_prefix()
    server = start_server([f"Answer {n}." for n in range(5)], store=url, store_prefix=prefix,
                          store_block_cache_bytes=700)  # a few blocks: the chain's first ones are evicted
    reads = count_reads(server)
    ids, said = chain(server.client(), 4)
    assert cache_of(server)["evictions"] > 0
    before = reads[0]
    server.client().responses.create(model="m", previous_response_id=ids[-1], input="go on")
    assert server.engine.last_prompt_text == chatml(*said, ("user", "go on"))
    assert reads[0] - before == 2  # the hint covered blocks no longer here: the second read names those held
    assert cache_of(server)["bytes"] <= 700


def test_without_a_hint_for_the_lineage_the_held_blocks_are_checked_and_not_sent(start_server):
    """A turn stored and deleted again cuts the lineage back (its generation changes, so the hint no longer holds):
    the next continuation's script checks every block and sends none, the replica holding them all."""
    url, prefix = shared_redis().url, unique_prefix()
    server = start_server([f"Answer {n}." for n in range(3)] + ["Branch."] + ["More."] * 4, store=url,
                          store_prefix=prefix)
    reads = count_reads(server)
    ids, said = chain(server.client(), 3)
    branch = server.client().responses.create(model="m", previous_response_id=ids[-1], input="a branch", store=True)
    server.client().responses.delete(branch.id)
    before, reads_before = cache_of(server), reads[0]
    server.client().responses.create(model="m", previous_response_id=ids[-1], input="go on")
    assert server.engine.last_prompt_text == chatml(*said, ("user", "go on"))
    after = cache_of(server)
    assert (after["misses"] - before["misses"], after["hits"] - before["hits"], reads[0] - reads_before) == (0, 6, 1)
