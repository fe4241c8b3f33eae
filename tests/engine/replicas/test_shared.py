"""Two Maya replicas sharing one Redis, in front of two engine replicas: where each prompt went is shared, so a
conversation continued through the other Maya still reaches the engine replica that holds its prefix; one API
key's prompts never route after another's; Redis down means local routing, never an error.

Each Maya is a real server on loopback (tests/server.py) with the upstream engine over two fake vLLM replicas
(tests/fake_upstream.py, which record what they were sent); Redis is a real redis-server (skipped, saying why,
where it is not installed). The conversation is sent as a stateless client sends it (Chat Completions, the whole
history each turn), alternating between the Mayas as a load balancer would.
"""

from __future__ import annotations

import re
import time

import pytest

from maya_server.config import ServerConfig, default_model_path

from maya_server.engine_setup import create_engine

from tests.fake_upstream import FakeUpstream
from tests.gguf_model_dir import smollm2_tokenizer, write_model_dir
from tests.redis_server import RedisServer, command
from tests.responses.store_backends import shared_redis, unique_prefix
from tests.server import RunningServer, prometheus_values

KEYS = ("key-A-0123456789", "key-B-0123456789")
SYSTEM = "You are a careful assistant. Answer every question in one short sentence, and never use lists."


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> str:
    return str(write_model_dir(default_model_path(), tmp_path_factory.mktemp("smollm2")))


@pytest.fixture
def upstreams():
    started = [FakeUpstream("vllm", smollm2_tokenizer()) for _ in range(2)]
    yield started
    for upstream in started:
        upstream.stop()


@pytest.fixture
def mayas(tokenizer_dir, upstreams):
    """start(count, **config) → Maya servers over both upstreams, on one Redis and one key prefix."""
    servers: list[RunningServer] = []

    def start(count: int = 2, **overrides) -> list[RunningServer]:
        overrides.setdefault("store", shared_redis().url)
        overrides.setdefault("store_prefix", unique_prefix())
        config = ServerConfig(engine="upstream", family="chatml", upstream_url=tuple(u.url for u in upstreams),
                              tokenizer=tokenizer_dir, upstream_read_timeout=30.0, **overrides)
        for _ in range(count):
            servers.append(RunningServer(config, create_engine(config)))
        return servers[-count:]

    yield start
    for server in servers:
        server.stop()


def turns(topic: str, count: int) -> list[dict]:
    """The history a client sends for its `count`-th turn about `topic` (the fake engines answer "Hello!")."""
    messages = [{"role": "system", "content": SYSTEM}]
    for n in range(count):
        if n:
            messages.append({"role": "assistant", "content": "Hello!"})
        messages.append({"role": "user", "content": f"Question {n + 1} about {topic}: tell me one more fact, please."})
    return messages


def send(server: RunningServer, upstreams, messages: list[dict], key: str | None = None) -> int:
    """Send one turn; the index of the engine replica that was sent it."""
    before = [len(u.requests) for u in upstreams]
    server.client(api_key=key).chat.completions.create(model="m", messages=messages, max_tokens=8)
    grown = [i for i, u in enumerate(upstreams) if len(u.requests) > before[i]]
    assert len(grown) == 1
    return grown[0]


def http(server: RunningServer):
    keys = server.config.api_keys
    return server.http(headers={"Authorization": f"Bearer {keys[0]}"} if keys else {})


def shared_figures(server: RunningServer) -> dict[str, float]:
    with http(server) as client:
        return prometheus_values(client.get("/metrics/prometheus").text, "maya:replica_affinity_shared_")


def settle(server: RunningServer) -> None:
    """Wait until the tips written in the background have reached Redis (its figures say so)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with http(server) as client:
            shared = client.get("/v1/status").json()["engine"]["routing"].get("shared_affinity")
        if shared is None:
            return  # nothing shared: nothing to wait for
        if shared["pending"] == 0 and shared["records"] + shared["dropped"] >= shared_routed(server):
            return
        time.sleep(0.05)
    raise AssertionError("the shared affinity's writes did not settle")


def shared_routed(server: RunningServer) -> int:
    return sum(r.routed for r in server.engine.replicas)


def test_a_conversation_continued_through_another_maya_reaches_the_same_engine_replica(mayas, upstreams):
    a, b = mayas(2)
    assert send(a, upstreams, turns("rivers", 1)) == 0  # another conversation takes the first replica
    home = send(a, upstreams, turns("mountains", 1))
    assert home == 1  # a new conversation goes to the least loaded
    settle(a)
    for turn in range(2, 6):  # the alternating client: even turns through B, odd ones through A
        server = b if turn % 2 == 0 else a
        assert send(server, upstreams, turns("mountains", turn)) == home, f"turn {turn}"
        settle(server)
    assert send(b, upstreams, turns("valleys", 1)) == 0  # B's own new conversation still goes by load
    figures = shared_figures(b)
    assert figures["maya:replica_affinity_shared_hits_total"] >= 2
    assert figures["maya:replica_affinity_shared_errors_total"] == 0


def test_keys_never_route_after_each_others_prompts_on_either_maya(mayas, upstreams):
    a, b = mayas(2, api_keys=KEYS)
    one, two = KEYS
    assert send(a, upstreams, turns("rivers", 1), one) == 0
    assert send(a, upstreams, turns("mountains", 1), one) == 1
    # the other key sends the very history key one's conversation continues with: it matches nothing
    assert send(a, upstreams, turns("mountains", 2), two) == 0  # least loaded on A (both replicas had one)
    settle(a)
    assert send(b, upstreams, turns("mountains", 2), one) == 1  # key one's own continuation follows through B
    assert send(b, upstreams, turns("mountains", 3), two) == 0  # and key two's follows its own, not key one's
    prefix = a.config.store_prefix
    names = [name.decode() for name in command(shared_redis().url, "KEYS", prefix + "*")]
    tips = [name for name in names if name.startswith(prefix + "affinity:")]
    assert tips and all(re.fullmatch(re.escape(prefix) + "affinity:[0-9a-f]{16}", name) for name in tips)
    values = {command(shared_redis().url, "GET", name).decode() for name in tips}
    assert values <= {u.url for u in upstreams}  # hashes and replica URLs only, never prompt text
    assert 0 < command(shared_redis().url, "PTTL", tips[0]) <= 3600 * 1000


def test_redis_down_routes_on_each_mayas_own_table_and_comes_back(mayas, upstreams, tmp_path, monkeypatch):
    monkeypatch.setattr("maya_server.engine.replicas.shared_affinity.RETRY_S", 0.3)
    redis = RedisServer(tmp_path)
    try:
        a, b = mayas(2, store=redis.url, store_command_timeout=0.5, store_connect_timeout=0.5)
        redis.kill()
        assert send(a, upstreams, turns("rivers", 1)) == 0
        assert send(a, upstreams, turns("mountains", 1)) == 1
        assert send(b, upstreams, turns("mountains", 2)) == 0  # no error: B routes on its own table (a miss)
        assert send(a, upstreams, turns("mountains", 3)) == 1  # A's own table still holds turn 1's prefix
        for server in (a, b):
            figures = shared_figures(server)
            assert figures["maya:replica_affinity_shared_errors_total"] >= 1
            assert figures["maya:replica_affinity_shared_hits_total"] == 0
        with b.http() as http:
            assert http.get("/v1/status").status_code == 200
        redis.start()
        time.sleep(0.4)  # past the pause after a failure
        assert send(a, upstreams, turns("lakes", 1)) == 0
        settle(a)
        assert send(b, upstreams, turns("lakes", 2)) == 0  # shared again (B's least loaded is replica 1)
        assert shared_figures(b)["maya:replica_affinity_shared_hits_total"] == 1
    finally:
        redis.stop()


def test_shared_affinity_off_with_a_ttl_of_zero(mayas, upstreams):
    a, b = mayas(2, replica_affinity_shared_ttl_s=0)
    assert send(a, upstreams, turns("rivers", 1)) == 0
    assert send(a, upstreams, turns("mountains", 1)) == 1
    assert send(b, upstreams, turns("mountains", 2)) == 0  # B knows nothing of A's routing
    with b.http() as http:
        assert http.get("/v1/status").json()["engine"]["routing"]["shared_affinity"] is None
        assert "maya:replica_affinity_shared_" not in http.get("/metrics/prometheus").text



@pytest.mark.parametrize("ttl, pinned", [(3600, False), (0, True)])
def test_a_fleet_leaves_llama_server_its_own_slot_choice(tokenizer_dir, ttl, pinned):
    """Maya's records of what each llama-server slot holds are its own; other Mayas send to the same slots, so
    Mayas that share their affinity send no `id_slot` (llama-server chooses), and a lone one still pins."""
    upstreams = [FakeUpstream("llama-server", smollm2_tokenizer()) for _ in range(2)]
    config = ServerConfig(engine="upstream", family="chatml", upstream_url=tuple(u.url for u in upstreams),
                          tokenizer=tokenizer_dir, upstream_read_timeout=30.0, store=shared_redis().url,
                          store_prefix=unique_prefix(), replica_affinity_shared_ttl_s=ttl)
    servers = [RunningServer(config, create_engine(config)) for _ in range(2)]
    try:
        a, b = servers
        send(a, upstreams, turns("rivers", 1))
        settle(a)
        send(b, upstreams, turns("rivers", 2))
        sent = [request for u in upstreams for request in u.requests if "prompt" in request or "tokens" in request]
        assert len(sent) == 2 and all(("id_slot" in request) == pinned for request in sent)
    finally:
        for server in servers:
            server.stop()
        for upstream in upstreams:
            upstream.stop()
