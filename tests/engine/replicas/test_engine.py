"""One Maya in front of two real llama-server replicas (SmolLM2, greedy): routing, status, failures, start-up.

Which replica served a request is read from the replicas themselves: each one's own
`/metrics` counts the tokens it predicted, and requests here run one at a time, so the
replica whose count grew served it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from maya_server.config import ServerConfig
from maya_server.engine_setup import create_engine
from maya_server.errors import ConfigError
from maya_server.model.hf_tokenizer import HfTokenizer

from tests.fake_upstream import FakeUpstream
from tests.llama_server import LlamaServer
from tests.server import RunningServer, prometheus_values, wait_for

pytestmark = pytest.mark.upstream

SYSTEM = ("You are a careful assistant for a small bakery. Answer in one short sentence. Prices are in euros, "
          "opening hours are 7 to 19, closed on Mondays. Never invent products that are not on the list: bread, "
          "croissants, baguettes, cakes and cookies.")
QUESTIONS = ("What do you sell?", "When are you open?", "Is it open on Monday?")
STORY = "Write a very long story about a dragon who learns to bake bread."


@pytest.fixture
def replicas(model, tmp_path):
    """Two llama-servers this test may kill and restart."""
    servers = [LlamaServer(model, ctx=4096, parallel=2, log_path=tmp_path / f"replica{i}.log") for i in range(2)]
    yield servers
    for server in servers:
        server.stop()


def start_maya(urls: list[str], tokenizer_dir: str, **overrides) -> RunningServer:
    values = dict(engine="upstream", family="chatml", upstream_url=tuple(urls), tokenizer=tokenizer_dir,
                  upstream_read_timeout=30.0, replica_probe_s=0.2)
    values.update(overrides)
    config = ServerConfig(**values)
    return RunningServer(config, create_engine(config))


def predicted(server: LlamaServer) -> int:
    """The tokens the replica generated so far; -1 while it is down."""
    with server.http() as client:
        try:
            page = client.get("/metrics").text
        except httpx.ConnectError:
            return -1
        for line in page.splitlines():
            if line.startswith("llamacpp:tokens_predicted_total "):
                return int(float(line.split()[1]))
    raise AssertionError("llama-server's /metrics has no llamacpp:tokens_predicted_total")


def served_by(servers: list[LlamaServer], before: list[int]) -> int:
    """The one replica whose predicted-token count grew since `before` (llama-server counts a request when its
    slot is released, just after the last chunk)."""
    grown: list[int] = []
    assert wait_for(lambda: grown.extend(
        i for i, s in enumerate(servers) if predicted(s) > before[i]) or bool(grown), timeout=5)
    assert len(set(grown)) == 1, f"both replicas generated during one request: {grown}"
    return grown[0]


def ask(maya: RunningServer, servers: list[LlamaServer], history: list[dict]) -> tuple[int, object]:
    """One turn of `history` (the answer appended to it); which replica answered, and the usage."""
    before = [predicted(s) for s in servers]
    reply = maya.client().chat.completions.create(model="m", messages=history, temperature=0, max_tokens=12)
    history.append({"role": "assistant", "content": reply.choices[0].message.content})
    return served_by(servers, before), reply.usage


def status_replicas(maya: RunningServer) -> list[dict]:
    return maya.http().get("/v1/status").json()["engine"]["replicas"]


def test_status_and_metrics_show_each_replica(replicas, tokenizer_dir):
    maya = start_maya([r.url for r in replicas], tokenizer_dir)
    try:
        status = maya.http().get("/v1/status").json()
        assert status["engine"]["slots"] == 4 and status["queue"]["slots"] == 4   # 2 slots each
        assert status["context_size"] == 2048
        assert [r["url"] for r in status["engine"]["replicas"]] == [r.url for r in replicas]
        assert all(r["up"] and r["healthy"] and r["kind"] == "llama-server" for r in status["engine"]["replicas"])
        assert status["engine"]["routing"]["mode"] == "affinity"
        ask(maya, replicas, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTIONS[0]}])
        metrics = prometheus_values(maya.http().get("/metrics/prometheus").text, "maya:")
        for server in replicas:
            assert metrics[f'maya:upstream_up{{url="{server.url}"}}'] == 1.0
            assert metrics[f'maya:upstream_slots{{url="{server.url}"}}'] == 2.0
        ok = [metrics[f'maya:upstream_requests_total{{outcome="ok",url="{s.url}"}}'] for s in replicas]
        assert sorted(ok) == [0.0, 1.0]
        assert metrics["maya:replica_affinity_limit"] == 131072.0 and metrics["maya:replica_affinity_entries"] > 0
    finally:
        maya.stop()


@pytest.mark.parametrize("routing", ["affinity", "round-robin"])
def test_a_conversations_turns_stay_on_one_replica_under_affinity(replicas, tokenizer_dir, routing):
    """Three conversations, their turns interleaved: with affinity each stays on one replica (and its turns
    find their history cached there) while new ones spread; round-robin scatters them (the check can fail)."""
    maya = start_maya([r.url for r in replicas], tokenizer_dir, replica_routing=routing)
    try:
        # each its own first words: llama-server, sent conversations that share a prefix, puts the next one in the
        # slot with the longest common prefix and overwrites it (its slot choice is another matter than routing)
        histories = [[{"role": "system", "content": f"Customer {n}. {SYSTEM}"}] for n in range(3)]
        served: list[list[int]] = [[] for _ in histories]
        for turn, question in enumerate(QUESTIONS):
            for number, history in enumerate(histories):
                history.append({"role": "user", "content": question})
                replica, usage = ask(maya, replicas, history)
                served[number].append(replica)
                if routing == "affinity" and turn > 0:
                    assert usage.prompt_tokens_details.cached_tokens > 0.8 * usage.prompt_tokens
        if routing == "affinity":
            assert all(len(set(turns)) == 1 for turns in served), served
            assert {turns[0] for turns in served} == {0, 1}, served  # new conversations went to both
            routes = [r["routes"] for r in status_replicas(maya)]
            assert sum(r["affinity"] for r in routes) == 6 and sum(r["least_loaded"] for r in routes) == 3
        else:
            assert any(len(set(turns)) > 1 for turns in served), served
    finally:
        maya.stop()


def test_a_replica_killed_mid_stream_fails_that_stream_cleanly_and_the_next_turn_moves_on(replicas, tokenizer_dir):
    maya = start_maya([r.url for r in replicas], tokenizer_dir)
    try:
        history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": STORY}]
        first, _ = ask(maya, replicas, history)
        history.append({"role": "user", "content": "Go on, longer."})
        client = maya.client(timeout=60)
        stream = client.chat.completions.create(model="m", messages=history, temperature=0, max_tokens=1500,
                                                stream=True)
        with pytest.raises(openai.APIError) as caught:
            for index, _ in enumerate(stream):
                if index == 3:
                    replicas[first].kill()   # the continuation went to the replica holding the conversation
        assert "upstream" in str(caught.value.message)
        out = status_replicas(maya)[first]
        assert out["up"] is False and out["healthy"] is False and out["requests"]["failed"] == 1

        other = 1 - first
        history.append({"role": "user", "content": "What is the capital of France?"})
        before = predicted(replicas[other])
        reply = client.chat.completions.create(model="m", messages=history, temperature=0, max_tokens=12)
        assert reply.choices[0].message.content
        assert predicted(replicas[other]) > before
        assert status_replicas(maya)[other]["requests"]["ok"] >= 1
    finally:
        maya.stop()


def test_a_replica_dead_between_turns_costs_the_next_turn_nothing_and_is_probed_back(replicas, tokenizer_dir):
    maya = start_maya([r.url for r in replicas], tokenizer_dir)
    try:
        history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTIONS[0]}]
        first, _ = ask(maya, replicas, history)
        replicas[first].kill()   # affinity sends the next turn to it
        history.append({"role": "user", "content": QUESTIONS[1]})
        other, _ = ask(maya, replicas, history)   # refused at connect, sent on before anything reached us
        assert other == 1 - first
        status = status_replicas(maya)
        assert status[first]["up"] is False and status[other]["routes"]["retry"] == 1

        replicas[first].start()   # the same port: the background probe finds it back
        assert wait_for(lambda: status_replicas(maya)[first]["up"], timeout=15)
        fresh = [ask(maya, replicas, [{"role": "user", "content": f"{QUESTIONS[2]} ({n})"}])[0] for n in range(3)]
        assert first in fresh, fresh   # new conversations go to it again
    finally:
        maya.stop()


def test_replicas_serving_different_models_are_refused_at_start_up(model, tokenizer_dir, tmp_path):
    real = LlamaServer(model, ctx=2048, parallel=1, log_path=tmp_path / "real.log")
    fake = FakeUpstream("llama-server", HfTokenizer.from_model_dir(tokenizer_dir))
    try:
        config = ServerConfig(engine="upstream", family="chatml", upstream_url=(real.url, fake.url),
                              tokenizer=tokenizer_dir)
        with pytest.raises(ConfigError) as caught:
            create_engine(config)
        assert caught.value.name == "upstream_url"
        message = str(caught.value)
        assert fake.url in message and real.url in message and "same model" in message
        assert "'fake' vs 'SmolLM2-135M-Instruct.Q4_1.gguf'" in message
    finally:
        fake.stop()
        real.stop()


WEDGE = dict(replica_check_s=0.5, replica_check_timeout=1.0, upstream_read_timeout=120.0)
"""Checks twice a second, one second to answer; the read timeout far longer than any wait in the test, so it is
not what ends a request."""


def new_conversations(maya: RunningServer, count: int, bound: float) -> list[str]:
    """`count` new conversations at once, each with `bound` seconds to be answered; their answers."""
    client = maya.client(timeout=bound)

    def one(number: int) -> str:
        reply = client.chat.completions.create(
            model="m", temperature=0, max_tokens=8,
            messages=[{"role": "user", "content": f"Customer {number}: {QUESTIONS[number % 3]}"}])
        return reply.choices[0].message.content

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


def test_a_wedged_replica_is_taken_out_its_requests_move_on_and_it_comes_back(replicas, tokenizer_dir):
    """SIGSTOP: the replica accepts connections and never answers. Every new conversation is still answered
    (one sent to it moves on once a check finds it out), status and metrics show it out, and SIGCONT brings it
    back after a probe."""
    maya = start_maya([r.url for r in replicas], tokenizer_dir, **WEDGE)
    try:
        replicas[0].pause()
        answers = new_conversations(maya, 4, bound=60)  # routed over both at once: two go to the wedged one
        assert all(answers), answers
        wedged, other = status_replicas(maya)
        assert wedged["up"] is False and wedged["healthy"] is False
        assert other["routes"]["retry"] >= 1  # sent to the wedged one first (a check takes a second to fail)
        assert "check" in wedged["last_error"] or "answer" in wedged["last_error"]
        metrics = prometheus_values(maya.http().get("/metrics/prometheus").text, "maya:upstream_up")
        assert metrics[f'maya:upstream_up{{url="{replicas[0].url}"}}'] == 0.0
        assert metrics[f'maya:upstream_up{{url="{replicas[1].url}"}}'] == 1.0
        assert wait_for(lambda: maya.http().get("/health").status_code == 200)

        replicas[0].resume()
        assert wait_for(lambda: status_replicas(maya)[0]["up"], timeout=20)
        assert status_replicas(maya)[0]["healthy"] is True
        answers = new_conversations(maya, 4, bound=60)
        assert all(answers) and status_replicas(maya)[0]["requests"]["ok"] >= 1  # it serves again
    finally:
        replicas[0].resume()
        maya.stop()


def test_a_client_that_gives_up_on_a_wedged_replica_counts_against_it(replicas, tokenizer_dir):
    """With checks only every minute, a request to the wedged replica waits; its client leaves first. That is no
    success (`abandoned`, not `cancelled`), and it has the replica checked at once: it is out."""
    maya = start_maya([r.url for r in replicas], tokenizer_dir, **{**WEDGE, "replica_check_s": 60.0})
    try:
        replicas[0].pause()
        with pytest.raises(openai.APITimeoutError):
            for number in range(6):  # new conversations go to the least loaded, alternately: one reaches it
                maya.client(timeout=3).chat.completions.create(
                    model="m", max_tokens=4, messages=[{"role": "user", "content": f"Hello {number}"}])
        assert wait_for(lambda: status_replicas(maya)[0]["up"] is False, timeout=10)
        wedged = status_replicas(maya)[0]
        assert wedged["requests"]["abandoned"] >= 1 and wedged["requests"]["cancelled"] == 0
        assert wedged["healthy"] is False
    finally:
        replicas[0].resume()
        maya.stop()
