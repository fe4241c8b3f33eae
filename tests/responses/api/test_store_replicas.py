"""Several Maya replicas sharing one Redis, through the OpenAI SDK: any replica continues, lists, deletes
what another stored; keys stay isolated across replicas; the fleet's bounds hold when two replicas write at
once; a replica restarted loses nothing; Redis killed mid-run gives 503s, then everything recovers.

Each replica is a real server on loopback (tests/server.py) with the scripted engine; Redis is a real
redis-server (skipped, saying why, where it is not installed)."""

from __future__ import annotations

import threading
import time

import openai
import pytest

from tests.redis_server import RedisServer
from tests.server import prometheus_values
from tests.responses.api.test_input_conversion import chatml
from tests.responses.store_backends import shared_redis, store_stats, unique_prefix


def replicas(start_server, count: int, script=("ok",) * 20, *, url: str | None = None, **config):
    """`count` servers on one Redis and one key prefix, as a fleet is configured."""
    config.setdefault("store", url or shared_redis().url)
    config.setdefault("store_prefix", unique_prefix())
    return [start_server(list(script), **config) for _ in range(count)]


def test_store_on_a_continue_on_b_list_on_c_delete_on_b_then_404_on_a(start_server):
    a, b, c = replicas(start_server, 3, ["Noted.", "You gave me 73."] * 3)
    first = a.client().responses.create(model="m", input="Remember the value 73", store=True)
    second = b.client().responses.create(model="m", previous_response_id=first.id, input="What value?", store=True)
    assert b.engine.last_prompt_text == chatml(("user", "Remember the value 73"), ("assistant", "Noted."),
                                               ("user", "What value?"))
    listed = c.client().responses.input_items.list(second.id, order="asc")
    assert [part.text for entry in listed.data for part in entry.content] == ["Remember the value 73", "Noted.",
                                                                             "What value?"]
    page = c.client().responses.input_items.list(second.id, order="asc", limit=1, after=listed.data[0].id)
    assert page.data[0].id == listed.data[1].id  # ids are stable across replicas
    assert a.client().responses.retrieve(second.id).model_dump() == second.model_dump()
    b.client().responses.delete(second.id)
    with pytest.raises(openai.NotFoundError):
        a.client().responses.retrieve(second.id)
    with pytest.raises(openai.NotFoundError):
        c.client().responses.input_items.list(second.id)
    assert a.client().responses.retrieve(first.id).id == first.id  # the ancestor stays


def test_keys_are_isolated_across_replicas(start_server):
    a, b = replicas(start_server, 2, api_keys=("key-one", "key-two"))
    mine = a.client("key-one").responses.create(model="m", input="secret", store=True)
    for replica in (a, b):
        with pytest.raises(openai.NotFoundError):
            replica.client("key-two").responses.retrieve(mine.id)
        with pytest.raises(openai.NotFoundError):
            replica.client("key-two").responses.create(model="m", previous_response_id=mine.id, input="x")
        with pytest.raises(openai.NotFoundError):
            replica.client("key-two").responses.delete(mine.id)
    assert b.client("key-one").responses.retrieve(mine.id).id == mine.id


def test_the_fleet_bounds_hold_when_two_replicas_write_at_once(start_server):
    a, b = replicas(start_server, 2, ["ok"] * 30, environ={"MAYA_GLM_RESPONSES_CACHE_ENTRIES": "5"})
    ids: dict[str, list[str]] = {"a": [], "b": []}

    def write(name, replica):
        client = replica.client()
        for n in range(12):
            ids[name].append(client.responses.create(model="m", input=f"{name} {n}", store=True).id)

    threads = [threading.Thread(target=write, args=item) for item in (("a", a), ("b", b))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = store_stats(a)
    assert stats["fleet"]["entries"] == 5 and stats["fleet"]["writes"] == 24 and stats["fleet"]["evictions"] == 19
    alive = [rid for rid in ids["a"] + ids["b"] if _found(b, rid)]
    assert len(alive) == 5


def _found(server, response_id: str) -> bool:
    try:
        server.client().responses.retrieve(response_id)
        return True
    except openai.NotFoundError:
        return False


def test_a_replica_restarted_loses_no_stored_response(start_server):
    prefix = unique_prefix()
    [a] = replicas(start_server, 1, store_prefix=prefix)
    client = a.client()
    first = client.responses.create(model="m", input="one", store=True)
    second = client.responses.create(model="m", previous_response_id=first.id, input="two", store=True)
    a.stop()  # SIGTERM's path: the graceful shutdown
    [again] = replicas(start_server, 1, ["continued"], store_prefix=prefix)
    assert again.client().responses.retrieve(second.id).model_dump() == second.model_dump()
    third = again.client().responses.create(model="m", previous_response_id=second.id, input="three")
    assert third.output_text == "continued" and "one" in again.engine.last_prompt_text


def test_redis_killed_mid_run_gives_503s_then_recovers_with_nothing_lost(start_server, tmp_path):
    redis = RedisServer(tmp_path, persistent=True)
    try:
        a, b = replicas(start_server, 2, ["ok"] * 20, url=redis.url, store_command_timeout=0.5,
                        store_connect_timeout=0.5)
        kept = a.client().responses.create(model="m", input="before the crash", store=True)
        redis.kill()
        with b.http() as http:
            continued = http.post("/v1/responses", json={"model": "m", "previous_response_id": kept.id, "input": "y"})
            refused = http.post("/v1/responses", json={"model": "m", "input": "x", "store": True})
            fetched = http.get(f"/v1/responses/{kept.id}")
            unstored = http.post("/v1/responses", json={"model": "m", "input": "no store needed"})
            status = http.get("/v1/status").json()["responses"]["cache"]
            down = prometheus_values(http.get("/metrics/prometheus").text, "maya:responses_cache_")
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "store_unavailable"
        assert refused.json()["error"]["type"] == "server_error"
        assert continued.status_code == 503 and fetched.status_code == 503
        assert unstored.status_code == 200 and unstored.json()["status"] == "completed"
        assert status["healthy"] is False and status["backend"] == "redis"
        assert down["maya:responses_cache_healthy"] == 0 and down["maya:responses_cache_command_errors_total"] >= 1
        assert down['maya:responses_cache_backend{backend="redis"}'] == 1
        engine_calls = b.engine.calls
        redis.start()
        deadline = time.monotonic() + 15
        while _status_code(b, kept.id) != 200:
            assert time.monotonic() < deadline, "the replica did not reconnect to Redis"
            time.sleep(0.2)
        assert b.engine.calls == engine_calls + 0  # nothing was generated for the refused requests
        after = b.client().responses.create(model="m", previous_response_id=kept.id, input="after", store=True)
        assert a.client().responses.retrieve(after.id).id == after.id
        with b.http() as http:
            up = prometheus_values(http.get("/metrics/prometheus").text, "maya:responses_cache_")
        assert up["maya:responses_cache_healthy"] == 1 and up["maya:responses_cache_command_seconds_count"] > 0
    finally:
        redis.stop()


def _status_code(server, response_id: str) -> int:
    with server.http() as http:
        return http.get(f"/v1/responses/{response_id}").status_code
