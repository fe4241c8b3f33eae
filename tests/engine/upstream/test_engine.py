"""The upstream engine end to end: Maya → a real llama-server (SmolLM2, greedy) through the SDK.

llama-server is built by `make test` (maya_server/engine/llama_server/build.py); if it
cannot be built these tests error rather than skip.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import openai
import pytest

from maya_server.config import ServerConfig
from maya_server.families import get_family
from maya_server.engine_setup import create_engine, template_family
from maya_server.neutral.conversation import Conversation, Message, TextPart
from maya_server.model.hf_tokenizer import HfTokenizer

from tests.llama_server import LlamaServer
from tests.server import RunningServer, wait_for

pytestmark = pytest.mark.upstream

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
STORY = [{"role": "user", "content": "Write a very long story about a dragon who learns to bake bread."}]


@pytest.fixture(scope="module")
def llama(model, tmp_path_factory):
    server = LlamaServer(model, ctx=4096, parallel=2, log_path=tmp_path_factory.mktemp("logs") / "llama-server.log")
    yield server
    server.stop()


def upstream_config(url: str, tokenizer_dir: str, **overrides) -> ServerConfig:
    values = dict(engine="upstream", family="chatml", upstream_url=url, tokenizer=tokenizer_dir,
                  upstream_read_timeout=30.0)
    values.update(overrides)
    return ServerConfig(**values)


def start_maya(url: str, tokenizer_dir: str, **overrides) -> RunningServer:
    config = upstream_config(url, tokenizer_dir, **overrides)
    return RunningServer(config, create_engine(config))


@pytest.fixture(scope="module")
def maya(llama, tokenizer_dir):
    server = start_maya(llama.url, tokenizer_dir)
    yield server
    server.stop()


def test_the_tokenizer_matches_llama_servers_own(llama, tokenizer_dir):
    tokenizer = HfTokenizer.from_model_dir(tokenizer_dir)
    texts = [
        "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
        "Numbers 1234567 and   spaces, ünïcödé, 日本語, emoji 🎉🐉.",
        "<|endoftext|>code: def f(x):\n\treturn x ** 2  # ok",
    ]
    with llama.http() as client:
        for text in texts:
            theirs = client.post("/tokenize", json={"content": text, "add_special": False, "parse_special": True}).json()
            assert tokenizer.encode(text, special=True) == theirs["tokens"]


def test_start_up_learns_slots_and_context_from_llama_server(maya):
    status = maya.http().get("/v1/status").json()
    assert status["engine"]["name"] == "upstream"
    assert status["engine"]["slots"] == 2            # llama-server's total_slots (-np 2)
    assert status["context_size"] == 2048            # its per-slot context (-c 4096 over 2 slots)
    upstream = status["engine"]["upstream"]
    assert upstream["kind"] == "llama-server"
    assert (upstream["url"],) == maya.config.upstream_url
    assert upstream["healthy"] is True and upstream["consecutive_failures"] == 0
    assert status["queue"]["slots"] == 2
    assert template_family(maya.engine) == "chatml"   # SmolLM2's template, from llama-server's /props


def test_a_model_directorys_own_template_names_the_family(llama, tokenizer_dir, tmp_path):
    directory = tmp_path / "glm-like"
    directory.mkdir()
    (directory / "tokenizer.json").write_text((Path(tokenizer_dir) / "tokenizer.json").read_text())
    (directory / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": "[gMASK]<sop>{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"}))
    engine = create_engine(upstream_config(llama.url, str(directory)))
    assert template_family(engine) == "glm"   # tokenizer_config.json wins over the upstream's /props


def test_chat_answers_through_llama_server(maya):
    completion = maya.client().chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=32)
    answer = completion.choices[0].message.content
    assert "Paris" in answer
    assert "<|im_end|>" not in answer and "<|im_start|>" not in answer
    assert completion.choices[0].finish_reason in ("stop", "length")
    assert completion.usage.completion_tokens > 0


def test_maya_sends_token_ids_and_decodes_what_llama_server_generates(maya, llama, tokenizer_dir):
    """The same ids sent straight to llama-server give the text Maya returned: prompt and decoding agree."""
    completion = maya.client().chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=24)
    conversation = Conversation(turns=(Message("user", (TextPart(QUESTION[0]["content"]),)),))
    prompt_ids = get_family("chatml").render(conversation).token_ids(HfTokenizer.from_model_dir(tokenizer_dir))
    assert completion.usage.prompt_tokens == len(prompt_ids)
    with llama.http() as client:
        direct = client.post("/v1/completions", json={
            "prompt": prompt_ids, "max_tokens": 24, "temperature": 0, "top_k": 0, "min_p": 0,
        }).json()
    assert direct["choices"][0]["text"] == completion.choices[0].message.content


def test_streaming_matches_non_streaming_and_reports_cached_tokens(maya):
    client = maya.client()
    whole = client.chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=24)
    chunks = list(client.chat.completions.create(
        model="m", messages=QUESTION, temperature=0, max_tokens=24, stream=True, stream_options={"include_usage": True}
    ))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == whole.choices[0].message.content
    usage = chunks[-1].usage
    assert usage.completion_tokens == whole.usage.completion_tokens
    assert usage.prompt_tokens == whole.usage.prompt_tokens
    assert 0 < usage.prompt_tokens_details.cached_tokens < usage.prompt_tokens  # llama-server reused the prefix


def test_max_tokens_ends_with_length(maya):
    completion = maya.client().chat.completions.create(model="m", messages=STORY, temperature=0, max_tokens=5)
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage.completion_tokens == 5


def test_seeded_sampling_is_repeatable(maya):
    client = maya.client()
    runs = [client.chat.completions.create(model="m", messages=STORY, temperature=0.9, top_p=0.9, seed=7, max_tokens=16)
            for _ in range(2)]
    assert runs[0].choices[0].message.content == runs[1].choices[0].message.content


def test_responses_through_llama_server(maya):
    client = maya.client()
    response = client.responses.create(model="m", input="What is the capital of France?", temperature=0, max_output_tokens=32)
    assert response.status in ("completed", "incomplete")
    assert "Paris" in response.output_text
    events = list(client.responses.create(
        model="m", input="What is the capital of France?", temperature=0, max_output_tokens=32, stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].type in ("response.completed", "response.incomplete")
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == response.output_text


def test_client_disconnect_frees_the_llama_server_slot(maya, llama):
    """Greedy, this story runs the whole 1900 tokens (~20 s here) unless the upstream request is closed."""
    decodes_before = llama.decode_calls()
    stream = maya.client().chat.completions.create(model="m", messages=STORY, temperature=0, max_tokens=1900, stream=True)
    for index, _ in enumerate(stream):
        if index == 3:
            break
    assert llama.slots_busy() == 1
    stream.close()
    # Generous: on a loaded two-core machine one llama-server decode step can take seconds.
    assert wait_for(lambda: llama.slots_busy() == 0, timeout=30), "llama-server kept generating for a gone client"
    assert llama.decode_calls() - decodes_before < 400, "the generation ran on after the client left"
    assert wait_for(lambda: maya.http().get("/v1/status").json()["queue"]["busy"] == 0)
    upstream = maya.http().get("/v1/status").json()["engine"]["upstream"]
    assert upstream["requests"]["cancelled"] >= 1 and upstream["healthy"] is True
    quick = maya.client().chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=4)
    assert quick.usage.completion_tokens > 0


def test_two_requests_run_at_once_on_two_slots(maya, llama):
    seen_busy: list[int] = []
    results: list[str] = []

    def ask() -> None:
        completion = maya.client().chat.completions.create(model="m", messages=STORY, temperature=0, max_tokens=48)
        results.append(completion.choices[0].message.content)

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    assert wait_for(lambda: seen_busy.append(llama.slots_busy()) or seen_busy[-1] == 2, timeout=30)
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == 2 and results[0] == results[1]


def test_metrics_show_the_upstream_without_its_key(model, tokenizer_dir, tmp_path):
    llama = LlamaServer(model, ctx=1024, parallel=1, api_key="sk-upstream-secret", log_path=tmp_path / "ls.log")
    try:
        maya = start_maya(llama.url, tokenizer_dir, upstream_key="sk-upstream-secret")
        try:
            reply = maya.client().chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=4)
            assert reply.usage.completion_tokens > 0
            metrics = maya.http().get("/metrics/prometheus").text
            status = maya.http().get("/v1/status").text
            assert f'maya:upstream_up{{url="{llama.url}"}} 1.0' in metrics
            assert 'maya:upstream_requests_total{outcome="ok"} 1.0' in metrics
            assert "maya:upstream_consecutive_failures 0.0" in metrics
            assert "maya:engine_slots 1.0" in metrics
            assert "sk-upstream-secret" not in metrics and "sk-upstream-secret" not in status
        finally:
            maya.stop()
    finally:
        llama.stop()


def test_the_upstreams_context_limit_is_a_400(llama, tokenizer_dir):
    maya = start_maya(llama.url, tokenizer_dir, ctx=8192)  # Maya believes in more context than llama-server has
    try:
        long_text = "word " * 2500
        with pytest.raises(openai.BadRequestError) as caught:
            maya.client().chat.completions.create(model="m", messages=[{"role": "user", "content": long_text}], max_tokens=8)
        assert caught.value.body["code"] == "context_length_exceeded"
        upstream = maya.http().get("/v1/status").json()["engine"]["upstream"]
        assert upstream["healthy"] is True and upstream["requests"]["rejected"] == 1
    finally:
        maya.stop()


@pytest.fixture
def own_llama(model, tmp_path):
    """A llama-server this test may kill and restart."""
    server = LlamaServer(model, ctx=2048, parallel=1, log_path=tmp_path / "llama-server.log")
    yield server
    server.stop()


def test_upstream_killed_mid_stream_fails_cleanly_and_recovers(own_llama, tokenizer_dir):
    maya = start_maya(own_llama.url, tokenizer_dir)
    try:
        client = maya.client()
        stream = client.chat.completions.create(model="m", messages=STORY, temperature=0, max_tokens=1500, stream=True)
        with pytest.raises(openai.APIError) as caught:
            for index, _ in enumerate(stream):
                if index == 3:
                    own_llama.kill()
        assert "upstream" in str(caught.value.message)
        with pytest.raises(openai.APIStatusError) as down:
            client.chat.completions.create(model="m", messages=QUESTION, max_tokens=4)
        assert down.value.status_code == 503 and down.value.body["code"] == "upstream_unavailable"
        upstream = maya.http().get("/v1/status").json()["engine"]["upstream"]
        assert upstream["healthy"] is False and upstream["consecutive_failures"] == 2
        assert "maya:upstream_up" in maya.http().get("/metrics/prometheus").text

        own_llama.start()
        reply = client.chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=16)
        assert "Paris" in reply.choices[0].message.content
        assert maya.http().get("/v1/status").json()["engine"]["upstream"]["healthy"] is True
    finally:
        maya.stop()


def test_upstream_killed_mid_response_emits_response_failed(own_llama, tokenizer_dir):
    maya = start_maya(own_llama.url, tokenizer_dir)
    try:
        events = []
        for event in maya.client().responses.create(model="m", input=STORY[0]["content"], temperature=0,
                                                     max_output_tokens=1500, stream=True):
            events.append(event)
            if event.type == "response.output_text.delta" and len(events) == 6:
                own_llama.kill()
        assert events[-1].type == "response.failed"
        error_events = [e for e in events if e.type == "error"]
        assert len(error_events) == 1 and error_events[0].code == "upstream_error"
        own_llama.start()
        response = maya.client().responses.create(model="m", input="What is the capital of France?", temperature=0,
                                                 max_output_tokens=16)
        assert response.status in ("completed", "incomplete") and response.output_text
    finally:
        maya.stop()
