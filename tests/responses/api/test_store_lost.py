"""Through HTTP and the OpenAI SDK, with the response store on a real Redis: a response whose keys Redis lost
(deleted by hand) is a 404 `stored_response_lost` on retrieve, input_items and continue, never a shorter 200 or
a 5xx (under eviction: `test_store_eviction_load.py`); the fleet's figures are recounted to what Redis really
holds; on a Redis at its maxmemory under `noeviction`, reads answer and a new stored response goes through after
Maya evicts its own least recently used responses. Skipped, saying why, where redis-server is not installed."""

from __future__ import annotations

import time

import openai
import pytest

from tests.redis_server import RedisServer, command
from tests.responses.store_backends import shared_redis, store_stats, unique_prefix
from tests.server import prometheus_values

LOST = "stored_response_lost"


def keys(url: str, prefix: str, pattern: str) -> list[bytes]:
    return command(url, "KEYS", prefix + pattern)


def lose(url: str, prefix: str, what: str, response_id: str, text: str) -> None:
    """Delete by hand one key the response needs: the block holding `text`, its lineage, or its envelope."""
    if what == "block":
        [key] = [key for key in keys(url, prefix, "b:*") if text.encode() in command(url, "GET", key)]
    elif what == "lineage":
        key = prefix + "l:" + command(url, "HGET", prefix + "e:" + response_id, "l").decode()
    else:  # turns may share one envelope: it is gone already when an earlier turn's was deleted
        for key in keys(url, prefix, "b:*:" + command(url, "HGET", prefix + "e:" + response_id, "env").decode()):
            assert command(url, "DEL", key) == 1
        return
    assert command(url, "DEL", key) == 1


def assert_lost(call, param: str | None) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        call()
    assert caught.value.status_code == 404
    assert (caught.value.body["code"], caught.value.body["type"], caught.value.body["param"]) == (
        LOST, "invalid_request_error", param)
    assert "lost part of it" in caught.value.message


def counted_equals_held(server, url: str, prefix: str) -> dict:
    """The store's figures once the probe's recount ran: its entries are the entry keys Redis holds (bounded
    wait: the fleet's recount lock lets one recount through per probe interval)."""
    deadline = time.monotonic() + 15
    while True:
        stats = store_stats(server)
        if stats["entries"] == len(keys(url, prefix, "e:*")) and stats["recounts"] >= 1:
            return stats
        assert time.monotonic() < deadline, (stats["entries"], len(keys(url, prefix, "e:*")), stats["recounts"])
        time.sleep(0.3)


@pytest.mark.parametrize("what", ["block", "lineage", "envelope"])
def test_a_key_deleted_by_hand_is_a_404_lost_on_retrieve_list_and_continue(start_server, what):
    url, prefix = shared_redis().url, unique_prefix()
    server = start_server(["Noted-0.", "Noted-1.", "Noted-2.", "Other."] + ["unused"] * 4, store=url,
                          store_prefix=prefix)
    client = server.client()
    ids = []
    for turn in range(3):
        ids.append(client.responses.create(model="m", input=f"turn {turn}", store=True,
                                           previous_response_id=ids[-1] if ids else None).id)
    other = client.responses.create(model="m", input="another conversation", store=True,
                                    instructions="Be brief.")  # its own envelope
    for rid in ids:  # the envelope differs by previous_response_id: lose each one's for that case
        if what == "envelope" or rid == ids[0]:
            lose(url, prefix, what, rid, "Noted-0.")
    engine_calls = server.engine.calls

    assert_lost(lambda: client.responses.retrieve(ids[0]), None)
    assert_lost(lambda: client.responses.input_items.list(ids[1]), None)
    assert_lost(lambda: client.responses.create(model="m", previous_response_id=ids[2], input="go on"),
                "previous_response_id")
    assert server.engine.calls == engine_calls  # nothing generated on a partial history
    for rid in ids:
        assert not keys(url, prefix, "e:" + rid)
        with pytest.raises(openai.NotFoundError) as caught:
            client.responses.retrieve(rid)
        assert caught.value.body["code"] == "not_found"  # removed: later reads are ordinary 404s
    assert client.responses.retrieve(other.id).output_text == "Other."
    with server.http() as http:
        metrics = prometheus_values(http.get("/metrics/prometheus").text, "maya:responses_cache_")
    assert metrics["maya:responses_cache_lost_total"] == 3
    stats = counted_equals_held(server, url, prefix)
    assert stats["entries"] == 1 and stats["lost"] == 3


def test_a_full_redis_under_noeviction_still_reads_and_makes_room_for_a_write(start_server):
    redis = RedisServer()  # noeviction: Redis's default policy
    try:
        prefix = unique_prefix()
        server = start_server(["ok"] * 100, store=redis.url, store_prefix=prefix, ctx=65536)
        client = server.client()
        words = "lorem ipsum " * 1700  # ~20 kB
        chains = []
        for c in range(10):
            first = client.responses.create(model="m", input=f"c{c} " + words, store=True)
            chains.append(client.responses.create(model="m", input=f"c{c} again " + words, store=True,
                                                  previous_response_id=first.id))
        store_stats(server)
        used = int(command(redis.url, "INFO", "memory")["used_memory"])
        command(redis.url, "CONFIG", "SET", "maxmemory", used - 10_000)
        with pytest.raises(Exception, match="maxmemory"):
            command(redis.url, "SET", "probe", "x" * 100)
        for second in chains:
            assert client.responses.retrieve(second.id).model_dump() == second.model_dump()
            assert len(client.responses.input_items.list(second.id).data) == 3
            reply = client.responses.create(model="m", previous_response_id=second.id, input="still there?")
            assert reply.status == "completed"
        used = int(command(redis.url, "INFO", "memory")["used_memory"])
        command(redis.url, "CONFIG", "SET", "maxmemory", used + 50_000)  # just above what it uses
        bigger = "dolor sit " * 4000  # ~40 kB
        for n in range(8):  # Redis refuses the write, Maya evicts its least recently used, the write goes through
            stored = client.responses.create(model="m", input=f"n{n} " + bigger, store=True)
            assert client.responses.retrieve(stored.id).id == stored.id
        with server.http() as http:
            metrics = prometheus_values(http.get("/metrics/prometheus").text, "maya:responses_cache_")
        assert metrics["maya:responses_cache_evictions_total"] > 0
    finally:
        redis.stop()
