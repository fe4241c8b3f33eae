"""The embedded engine as a user meets it: Maya's own llama-server child on SmolLM2.

Against the real child: parallel requests overlap in llama-server's own slots,
a child killed mid-stream fails the request (nothing stored) and is restarted,
our tokenizer and template render exactly what llama-server would, and the
`maya` command itself (no flags) answers in `content`, refuses a contradicting
`--family`, and leaves no child behind whether it is stopped or killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import httpx
import openai
import pytest

from maya_server.neutral.conversation import Conversation, Message, TextPart
from maya_server.families import get_family
from maya_server.engine.llama_server.child import LlamaServerOptions, LlamaServerProcess
from maya_server.errors import EngineOptionError, EngineStartError
from maya_server.engine.llama_server.engine import check_tokenizer
from maya_server.engine_setup import EMBEDDED_SETTINGS, WORDING, template_family

from tests.embedded import child_http, embedded_server, process_gone, start_cli
from tests.llama_server import free_port
from tests.server import wait_for

pytestmark = pytest.mark.slow

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
STORY = "Write a very long story about a dragon who learns to bake bread."


@pytest.fixture(scope="module")
def maya():
    with embedded_server(ctx=2048, slots=4) as server:
        yield server


def test_status_shows_the_child_and_the_models_own_family(maya):
    status = maya.http().get("/v1/status").json()
    assert status["family"] == "chatml"   # no family configured: SmolLM2's template says ChatML
    engine = status["engine"]
    assert engine["name"] == "llamacpp" and engine["slots"] == 4 and status["context_size"] == 2048
    assert engine["process"]["state"] == "ready" and engine["process"]["restarts"] == 0
    assert template_family(maya.engine) == "chatml"
    assert maya.engine.process.api_key not in maya.http().get("/v1/status").text


def test_four_requests_overlap_in_llama_servers_own_slots(maya):
    results: list[int] = []

    def ask() -> None:
        reply = maya.client().chat.completions.create(
            model="m", messages=[{"role": "user", "content": STORY}], temperature=0, max_tokens=64)
        results.append(reply.usage.completion_tokens)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    busy: list[int] = []
    with child_http(maya.engine) as child:
        def all_four_busy() -> bool:
            busy.append(sum(1 for slot in child.get("/slots").json() if slot["is_processing"]))
            return busy[-1] == 4
        overlapped = wait_for(all_four_busy, timeout=60)
    for thread in threads:
        thread.join(timeout=120)
    assert overlapped, f"llama-server never ran the four at once (busy slots seen: {sorted(set(busy))})"
    assert results == [64] * 4


def test_our_render_is_exactly_what_llama_server_makes_of_the_template(maya):
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi <b>there</b> 123!"},
                {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Count: 1, 22, 333."}]
    conversation = Conversation(turns=tuple(Message(m["role"], (TextPart(m["content"]),)) for m in messages))
    ours = get_family("chatml").render(conversation).token_ids(maya.engine.tokenizer)
    with child_http(maya.engine) as child:
        text = child.post("/apply-template", json={"messages": messages}).json()["prompt"]
        theirs = child.post("/tokenize", json={"content": text, "add_special": False, "parse_special": True}).json()
    assert ours == theirs["tokens"]


def test_a_tokenizer_that_disagrees_with_llama_server_stops_start_up(maya):
    ours = maya.engine.tokenizer

    class OffByOne:
        def encode(self, text, *, special):
            return [i + 1 for i in ours.encode(text, special=special)]

    class MisreadsBytes:
        encode = staticmethod(ours.encode)

        def decode(self, ids):
            return ours.decode(ids).replace("é", "e")

    with child_http(maya.engine) as child:
        check_tokenizer(ours, ours.vocabulary, child)  # ours agrees
        with pytest.raises(EngineOptionError) as split:
            check_tokenizer(OffByOne(), ours.vocabulary, child)
        with pytest.raises(EngineOptionError) as decoded:
            check_tokenizer(MisreadsBytes(), ours.vocabulary, child)
    assert split.value.option == "tokenizer_dir" and decoded.value.option == "model"
    # the edge names the setting, with the way out
    assert EMBEDDED_SETTINGS[split.value.option] == "tokenizer" and WORDING[split.value.reason].startswith(
        "the tokenizer of --tokenizer DIR")


def test_a_resent_history_asks_llama_server_only_for_what_is_new(maya):
    cache = maya.engine.tokenizer.cache
    history = [{"role": "system", "content": "You are terse."},
               {"role": "user", "content": "Name a colour. " * 40}]
    client = maya.client()
    first = client.chat.completions.create(model="m", messages=history, temperature=0, max_tokens=4)
    misses = cache.misses
    history += [{"role": "assistant", "content": first.choices[0].message.content},
                {"role": "user", "content": "Another one."}]
    second = client.chat.completions.create(model="m", messages=history, temperature=0, max_tokens=4)
    # the new user text only: the rest was kept, and the answer goes as the ids the model generated for it
    assert cache.misses - misses == 1
    assert second.usage.prompt_tokens > first.usage.prompt_tokens
    metrics = maya.http().get("/metrics/prometheus").text
    assert "maya:tokenize_cache_hits_total" in metrics and "maya:tokenize_cache_limit_bytes 6.7108864e+07" in metrics
    assert "maya:spelling_memory_hits_total 1.0" in metrics


def test_the_child_gets_the_operators_flags_and_none_of_mayas_secrets(monkeypatch):
    monkeypatch.setenv("MAYA_API_KEYS", "sk-never-in-the-child")
    monkeypatch.setenv("LLAMA_ARG_N_PREDICT", "1")   # would cut every answer to one token behind Maya's back
    with embedded_server(ctx=512, slots=1, engine_args=("--no-repack",)) as server:
        pid = server.engine.process.pid
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        reply = server.client().chat.completions.create(
            model="m", messages=[{"role": "user", "content": STORY}], temperature=0, max_tokens=8)
    assert b"--no-repack" in argv and argv[argv.index(b"--flash-attn") + 1] == b"off"
    assert b"sk-never-in-the-child" not in environ and b"LLAMA_ARG_" not in environ and b"PATH=" in environ
    assert reply.usage.completion_tokens == 8


@pytest.fixture
def one_slot():
    with embedded_server(ctx=2048, slots=1) as server:
        yield server


def _interleaved_continuation(server) -> tuple[int, int, int]:
    """A's opening, B's opening, A's continuation on one server: (A's prompt, B's cached, A2's cached)."""
    client = server.client()

    def opening(topic: str):
        notes = " ".join(f"Note {i}: the {topic} was seen near marker {i * 7}." for i in range(30))
        return client.responses.create(model="m", input=notes + " Summarize.", temperature=0,
                                       max_output_tokens=16, store=True)

    first_a, first_b = opening("heron"), opening("otter")
    again_a = client.responses.create(model="m", previous_response_id=first_a.id, input="Which animal was it?",
                                      temperature=0, max_output_tokens=16, store=True)
    return (first_a.usage.input_tokens, first_b.usage.input_tokens_details.cached_tokens,
            again_a.usage.input_tokens_details.cached_tokens)


def test_interleaved_conversations_resume_from_llama_servers_prompt_cache(one_slot):
    """One slot, two conversations taking turns: B's turn evicts A's KV from the slot, and A's
    continuation still finds its prefix, in llama-server's RAM prompt cache; without the cache it cannot."""
    prompt_a, cached_b, cached_a2 = _interleaved_continuation(one_slot)
    assert cached_b < prompt_a // 4  # B shares little with A
    assert cached_a2 >= prompt_a
    with embedded_server(ctx=2048, slots=1, cache_ram_mib=0) as uncached:
        _, _, cold_a2 = _interleaved_continuation(uncached)
    assert cold_a2 < prompt_a // 4


def test_a_child_killed_mid_stream_fails_the_response_stores_nothing_and_restarts(one_slot):
    client = one_slot.client()
    events = []
    for event in client.responses.create(model="m", input=STORY, temperature=0, max_output_tokens=1500,
                                         stream=True, store=True):
        events.append(event)
        if event.type == "response.output_text.delta" and len(events) == 6:
            os.kill(one_slot.engine.process.pid, signal.SIGKILL)
    assert events[-1].type == "response.failed"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(events[0].response.id)

    def restarted() -> bool:
        process = one_slot.http().get("/v1/status").json()["engine"]["process"]
        return process["restarts"] == 1 and process["state"] == "ready"
    assert wait_for(restarted, timeout=60)
    assert "maya:engine_process_restarts_total 1.0" in one_slot.http().get("/metrics/prometheus").text
    reply = client.chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=16)
    assert "Paris" in reply.choices[0].message.content


def test_a_child_killed_mid_chat_stream_ends_it_with_an_error(one_slot):
    stream = one_slot.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": STORY}], temperature=0, max_tokens=1500, stream=True)
    with pytest.raises(openai.APIError):
        for index, _ in enumerate(stream):
            if index == 3:
                os.kill(one_slot.engine.process.pid, signal.SIGKILL)


# The `maya` command itself, as a user runs it.

def test_maya_with_no_flags_answers_in_content_and_sigterm_stops_both(tmp_path):
    process, url = start_cli(tmp_path=tmp_path)
    try:
        status = httpx.get(url + "/v1/status").json()
        assert status["family"] == "chatml"                      # from SmolLM2's template, not maya's glm default
        assert status["context_size"] == 8192                    # the model's training context
        child = status["engine"]["process"]["pid"]
        reply = openai.OpenAI(base_url=url + "/v1", api_key="x").chat.completions.create(
            model="m", messages=QUESTION, temperature=0, max_tokens=24)
        assert "Paris" in reply.choices[0].message.content
        assert getattr(reply.choices[0].message, "reasoning_content", None) in (None, "")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert wait_for(lambda: process_gone(child), timeout=15)
    finally:
        process.kill()
    log = (tmp_path / "maya.log").read_text()
    assert "llama-server ready" in log
    assert "cleaning up before exit" in log  # llama-server's own goodbye: stopped by SIGTERM, not killed
    assert "chatml family (from the model's chat template); context 8192 tokens per sequence " \
           "(the model's training context)" in log


def test_sigkill_of_maya_takes_the_child_down(tmp_path):
    process, url = start_cli("--ctx", "512", "--slots", "1", tmp_path=tmp_path)
    try:
        child = httpx.get(url + "/v1/status").json()["engine"]["process"]["pid"]
        assert not process_gone(child)
        process.kill()
        process.wait(timeout=10)
        assert wait_for(lambda: process_gone(child), timeout=15), "llama-server outlived a SIGKILLed Maya"
    finally:
        process.kill()


def test_a_ctx_over_the_training_context_is_not_credited_to_ctx(tmp_path):
    """SmolLM2 was trained on 8192 tokens and llama-server caps a slot's context there: start-up says the context
    served, and that it is not what --ctx asked (as for Codex's recipe, which needs 16384)."""
    process, url = start_cli("--ctx", "16384", "--slots", "1", tmp_path=tmp_path)
    try:
        assert httpx.get(url + "/v1/status").json()["context_size"] == 8192
    finally:
        process.terminate()
        process.wait(timeout=30)
    log = (tmp_path / "maya.log").read_text()
    assert "context 8192 tokens per sequence (--ctx asked 16384; llama-server caps it at the model's training " \
           "context)" in log, log
    assert "(--ctx)" not in log
    assert "1 slots x 16384 tokens (as configured; llama-server caps a slot at the model's training context, 8192)" in log
    assert "WARNING maya: --ctx 16384 was asked, but the engine serves 8192 tokens per sequence" in log


def test_a_family_that_contradicts_the_template_stops_start_up(tmp_path):
    result = subprocess.run([sys.executable, "-m", "maya_server", "--family", "glm", "--ctx", "512", "--slots", "1",
                             "--port", str(free_port())], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "--family glm contradicts the model's chat template, which is chatml" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_binary_that_cannot_run_is_a_start_up_error(tmp_path):
    broken = tmp_path / "llama-server"
    broken.write_text("not a program")
    broken.chmod(0o755)
    options = LlamaServerOptions(binary=broken, model="m.gguf", slots=1, ctx=512)
    with pytest.raises(EngineStartError) as caught:
        LlamaServerProcess(options).start()
    assert "could not be started" in str(caught.value)
    with pytest.raises(EngineStartError) as exited:
        LlamaServerProcess(replace(options, binary=Path("/bin/false"))).start()
    assert "exited (exit code 1) while loading the model" in str(exited.value)
