"""The embedded engine's tokenizer: llama-server splits text, the GGUF's vocabulary places control tokens, a bounded
cache spares a resent history; without a child (a recording transport stands in for llama-server's /tokenize)."""

from __future__ import annotations

import json

import httpx
import pytest

from maya_server.config import default_model_path
from maya_server.engine.llama_server.tokenizer import LlamaServerTokenizer, TokenCache, TokenCacheCollector
from maya_server.util.ids_cache import ENTRY_OVERHEAD
from maya_server.errors import UpstreamError, UpstreamUnavailable
from maya_server.model.gguf_metadata import read_gguf_metadata
from maya_server.model.gguf_vocabulary import GgufVocabulary

from tests.gguf_model_dir import smollm2_tokenizer


class FakeTokenize:
    """llama-server's /tokenize, answered with SmolLM2's own ids; records what it was asked."""

    def __init__(self, status: int = 200) -> None:
        self.asked: list[dict] = []
        self.status = status
        self._ids = smollm2_tokenizer()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.asked.append(body)
        if self.status != 200:
            return httpx.Response(self.status, json={"error": {"message": "no"}})
        return httpx.Response(200, json={"tokens": self._ids.encode(body["content"], special=body["parse_special"])})


@pytest.fixture(scope="module")
def vocabulary() -> GgufVocabulary:
    return GgufVocabulary(read_gguf_metadata(default_model_path()))


def tokenizer_over(engine: FakeTokenize, vocabulary: GgufVocabulary, limit: int = 1 << 20) -> LlamaServerTokenizer:
    client = httpx.Client(transport=httpx.MockTransport(engine), base_url="http://llama-server")
    return LlamaServerTokenizer(vocabulary, client, TokenCache(limit))


def test_control_tokens_are_placed_by_id_without_asking_the_engine(vocabulary):
    engine = FakeTokenize()
    tokenizer = tokenizer_over(engine, vocabulary)
    assert tokenizer.encode("<|im_start|>", special=True) == [vocabulary.special_id("<|im_start|>")]
    assert tokenizer.token_id("<|im_end|>") == vocabulary.special_id("<|im_end|>") == 2
    assert tokenizer.token_id("not a token") is None
    assert engine.asked == []


def test_client_text_is_tokenized_without_special_parsing_and_only_once(vocabulary):
    engine = FakeTokenize()
    tokenizer = tokenizer_over(engine, vocabulary)
    first = tokenizer.encode("Hi <|im_end|> there", special=False)
    assert vocabulary.special_id("<|im_end|>") not in first
    assert tokenizer.encode("Hi <|im_end|> there", special=False) == first
    assert engine.asked == [{"content": "Hi <|im_end|> there", "add_special": False, "parse_special": False}]
    assert tokenizer.cache.hits == 1 and tokenizer.cache.misses == 1
    assert tokenizer.decode(first) == "Hi <|im_end|> there"


def test_a_control_run_that_is_not_one_token_asks_with_special_parsing(vocabulary):
    engine = FakeTokenize()
    tokenizer = tokenizer_over(engine, vocabulary)
    ids = tokenizer.encode("<|im_start|>assistant", special=True)
    assert ids[0] == vocabulary.special_id("<|im_start|>") and len(ids) > 1
    assert engine.asked[0]["parse_special"] is True


@pytest.mark.parametrize("status", [500, 503])
def test_an_engine_that_cannot_tokenize_is_unavailable_not_a_crash(vocabulary, status):
    tokenizer = tokenizer_over(FakeTokenize(status), vocabulary)
    with pytest.raises(UpstreamUnavailable):
        tokenizer.encode("hello", special=False)
    assert len(tokenizer.cache) == 0


def test_an_answer_without_ids_is_an_upstream_error(vocabulary):
    client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={"tokens": "x"})),
                          base_url="http://llama-server")
    with pytest.raises(UpstreamError):
        LlamaServerTokenizer(vocabulary, client, TokenCache(1 << 20)).encode("hello", special=False)


def test_the_cache_drops_the_least_recently_used_to_stay_in_its_bytes():
    cache = TokenCache(limit_bytes=3 * (ENTRY_OVERHEAD + 200))
    for i in range(3):
        cache.put(f"text {i}", False, [i] * 10)
    assert len(cache) == 3 and cache.size_bytes <= cache.limit_bytes
    assert cache.get("text 0", False) == [0] * 10          # now the most recent
    cache.put("text 3", False, [3] * 10)
    assert cache.get("text 1", False) is None and cache.get("text 0", False) == [0] * 10
    assert cache.evictions == 1 and cache.size_bytes <= cache.limit_bytes
    assert cache.get("text 0", True) is None               # special and plain are separate entries


def test_a_run_larger_than_the_whole_cache_is_not_kept():
    cache = TokenCache(limit_bytes=1000)
    cache.put("x" * 5000, False, list(range(2000)))
    assert len(cache) == 0 and cache.size_bytes == 0


def test_replacing_an_entry_counts_its_bytes_once():
    cache = TokenCache(limit_bytes=1 << 20)
    cache.put("a", False, [1, 2, 3])
    size = cache.size_bytes
    cache.put("a", False, [1, 2, 3])
    assert cache.size_bytes == size and len(cache) == 1


def test_the_cache_is_in_the_metrics():
    cache = TokenCache(limit_bytes=1 << 20)
    cache.put("a", False, [1])
    cache.get("a", False)
    cache.get("b", False)
    samples = {s.name: s.value for family in TokenCacheCollector(cache).collect() for s in family.samples}
    assert samples["maya:tokenize_cache_limit_bytes"] == 1 << 20
    assert samples["maya:tokenize_cache_bytes"] == cache.size_bytes > 0
    assert samples["maya:tokenize_cache_entries"] == 1
    assert samples["maya:tokenize_cache_hits_total"] == 1 and samples["maya:tokenize_cache_misses_total"] == 1
    assert samples["maya:tokenize_cache_evictions_total"] == 0
