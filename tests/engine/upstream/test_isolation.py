"""With two or more API keys, each key's requests reach an upstream engine's prefix cache apart from the others.

vLLM and SGLang are told the key's salt (`cache_salt`: a keyed hash of the key, never the key); llama-server has
no salt, so Maya keeps its slots apart: a request takes a slot of its own key's (or an empty one), and one that
must take a slot another key left is sent `cache_prompt: false`, so nothing of that key's prompt is reused.
Fake upstreams (tests/fake_upstream.py) record what they were sent.
"""

from __future__ import annotations

import asyncio

import pytest

from maya_server.config import ServerConfig, default_model_path
from maya_server.engine.base import GeneratedToken, Generation, SamplingParams
from maya_server.engine_setup import create_engine
from maya_server.pipeline.cache_scope import cache_salt

from tests.fake_upstream import FakeUpstream
from tests.gguf_model_dir import smollm2_tokenizer, write_model_dir
from tests.server import RunningServer

KEYS = ("key-A-0123456789", "key-B-0123456789")


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> str:
    return str(write_model_dir(default_model_path(), tmp_path_factory.mktemp("smollm2")))


def start(kind: str, tokenizer_dir: str, **overrides):
    upstream = FakeUpstream(kind, smollm2_tokenizer())
    config = ServerConfig(engine="upstream", family="chatml", upstream_url=upstream.url, tokenizer=tokenizer_dir,
                          upstream_read_timeout=30.0, **overrides)
    return upstream, config


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_each_keys_requests_carry_their_own_salt_to_the_engine(kind, tokenizer_dir):
    upstream, config = start(kind, tokenizer_dir, api_keys=KEYS)
    server = RunningServer(config, create_engine(config))
    try:
        for key in (KEYS[0], KEYS[1], KEYS[0]):
            server.client(api_key=key).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "The same words from both keys."}])
    finally:
        server.stop()
        upstream.stop()
    salts = [request.get("cache_salt") for request in upstream.requests if "prompt" in request]
    assert len(salts) == 3 and salts[0] == salts[2] != salts[1]
    assert all(isinstance(salt, str) and len(salt) >= 43 for salt in salts)  # 256 bits, as vLLM asks
    assert not any(key in salt or salt in key for salt in salts for key in KEYS)


def test_shared_caches_send_no_salt(tokenizer_dir):
    upstream, config = start("vllm", tokenizer_dir, api_keys=KEYS, prompt_cache_isolation="shared")
    server = RunningServer(config, create_engine(config))
    try:
        server.client(api_key=KEYS[0]).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    finally:
        server.stop()
        upstream.stop()
    assert "cache_salt" not in upstream.requests[-1]


@pytest.fixture
def llama_server(tokenizer_dir):
    upstream, config = start("llama-server", tokenizer_dir)
    engine = create_engine(config)
    yield engine, upstream
    asyncio.run(engine.close())
    upstream.stop()


async def run(engine, ids: list[int], salt: str | None) -> None:
    async for token in engine.generate(Generation(ids, SamplingParams(max_tokens=8), cache_salt=salt)):
        assert isinstance(token, GeneratedToken)


def test_a_llama_server_slot_another_key_left_is_not_reused(llama_server):
    engine, upstream = llama_server
    a, b = cache_salt("owner-a"), cache_salt("owner-b")
    prompt = engine.tokenizer.encode("Secret instructions only key A sent. " * 10, special=False)

    async def turns() -> None:
        for _ in range(engine.slots):  # key A leaves its prompt in every slot
            held = [engine.generate(Generation(prompt, SamplingParams(max_tokens=8), cache_salt=a))
                    for _ in range(engine.slots)]
            for stream in held:
                await anext(stream)
            for stream in held:
                async for _ in stream:
                    pass
        await run(engine, prompt, b)  # key B sends the same prompt: only slots key A left are free
        await run(engine, prompt, a)

    asyncio.run(turns())
    probe, own = upstream.requests[-2], upstream.requests[-1]
    assert probe["cache_prompt"] is False  # B's prompt is evaluated whole: its cached_tokens is 0
    assert own["cache_prompt"] is True and own["id_slot"] != probe["id_slot"]  # A keeps its own slots


def test_an_empty_llama_server_slot_is_taken_before_another_keys(llama_server):
    engine, upstream = llama_server
    a, b = cache_salt("owner-a"), cache_salt("owner-b")
    prompt = engine.tokenizer.encode("Shared words. " * 10, special=False)

    asyncio.run(run(engine, prompt, a))
    asyncio.run(run(engine, prompt, b))

    first, second = upstream.requests[-2:]
    assert first["id_slot"] != second["id_slot"]  # B does not land on the slot that holds A's prompt
    assert second["cache_prompt"] is True  # an empty slot holds nothing of anyone's
