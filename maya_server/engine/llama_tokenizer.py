"""The embedded engine's tokenizer: llama-server splits the text, Maya places the control tokens.

Why not a tokenizer of our own: llama.cpp knows some ninety pre-tokenizers
(GLM's `glm4`, DeepSeek-V4's `joyai-llm`, Qwen's, Llama 3's…) and SentencePiece;
rebuilding each in Python would be a second implementation to keep equal to
the first, and any slip would shift every prompt by a token. Asking the child
(its `/tokenize`, over the private socket) is exact by construction, for every
GGUF llama.cpp loads.

What goes where:

- a control segment the family wrote (`<|user|>`) is looked up by text in the
  GGUF's vocabulary and placed by id; only a control run that is not one token
  asks llama-server, with special-token parsing on;
- client text is tokenized with special-token parsing off: llama.cpp then never
  matches a control token in it, while non-special added tokens (GLM's
  `<think>`, `<tool_call>`) are matched as the model's own tokenizer matches them;
- generated ids are decoded locally (`GgufVocabulary`), never over the socket.

Agents resend their whole history every turn, so each run's ids are kept in a
`TokenCache` (least recently used out first, bounded in bytes): the next turn
asks llama-server only for what is new.
"""

from __future__ import annotations

import sys
import threading
from array import array
from collections import OrderedDict
from typing import Iterator, Sequence

import httpx
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..errors import UpstreamError, UpstreamUnavailable
from ..model.gguf_vocabulary import GgufVocabulary

ENTRY_OVERHEAD = 200
"""Bytes an entry costs beyond its text and ids: the dict slot, the LRU links and the key tuple."""


class TokenCache:
    """Text runs' token ids, least recently used dropped first once `limit_bytes` is reached; thread-safe
    (prompts are prepared in worker threads). A run larger than the whole limit is not kept."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.size_bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._entries: OrderedDict[tuple[str, bool], array] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, text: str, special: bool) -> list[int] | None:
        with self._lock:
            ids = self._entries.get((text, special))
            if ids is None:
                self.misses += 1
                return None
            self._entries.move_to_end((text, special))
            self.hits += 1
            return ids.tolist()

    def put(self, text: str, special: bool, ids: Sequence[int]) -> None:
        stored = array("i", ids)
        cost = _cost(text, stored)
        if cost > self.limit_bytes:
            return
        with self._lock:
            old = self._entries.pop((text, special), None)
            if old is not None:
                self.size_bytes -= _cost(text, old)
            while self._entries and self.size_bytes + cost > self.limit_bytes:
                (old_text, _), old_ids = self._entries.popitem(last=False)
                self.size_bytes -= _cost(old_text, old_ids)
                self.evictions += 1
            self._entries[(text, special)] = stored
            self.size_bytes += cost


def _cost(text: str, ids: array) -> int:
    return sys.getsizeof(text) + sys.getsizeof(ids) + ENTRY_OVERHEAD


class LlamaServerTokenizer:
    """A `Tokenizer` backed by a running llama-server. Example::

        tokenizer = LlamaServerTokenizer(GgufVocabulary(metadata), client, TokenCache(64 << 20))
        tokenizer.encode("<|user|>", special=True)    # [its id], from the vocabulary
        tokenizer.encode("<|user|>", special=False)   # several ordinary tokens, from llama-server
    """

    def __init__(self, vocabulary: GgufVocabulary, client: httpx.Client, cache: TokenCache) -> None:
        self.vocabulary = vocabulary
        self.cache = cache
        self._client = client

    def encode(self, text: str, *, special: bool) -> list[int]:
        if special:
            token_id = self.vocabulary.special_id(text)
            if token_id is not None:
                return [token_id]
        ids = self.cache.get(text, special)
        if ids is None:
            ids = self.engine_tokens(text, special=special)
            self.cache.put(text, special, ids)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return self.vocabulary.decode(ids)

    def token_id(self, text: str) -> int | None:
        return self.vocabulary.special_id(text)

    def token_bytes(self, token_id: int) -> bytes:
        """One token's bytes: the text of ids is their bytes joined (`IncrementalDetokenizer`'s fast path)."""
        return self.vocabulary.piece(token_id)

    def engine_tokens(self, text: str, *, special: bool) -> list[int]:
        """llama-server's own ids for `text`, uncached (no BOS; `special` parses control tokens)."""
        try:
            response = self._client.post("/tokenize", json={"content": text, "add_special": False,
                                                             "parse_special": special})
        except httpx.HTTPError as exc:
            raise UpstreamUnavailable(f"llama-server did not tokenize the prompt ({type(exc).__name__})") from None
        if response.status_code != 200:
            raise UpstreamUnavailable(f"llama-server's /tokenize answered HTTP {response.status_code}")
        tokens = response.json().get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise UpstreamError("llama-server's /tokenize answered without a list of token ids")
        return tokens

    def close(self) -> None:
        self._client.close()


class TokenCacheCollector:
    """`maya:tokenize_cache_*`: the cache's size against its limit, its hits, misses and evictions."""

    def __init__(self, cache: TokenCache) -> None:
        self._cache = cache

    def collect(self) -> Iterator[Metric]:
        cache = self._cache
        yield GaugeMetricFamily("maya:tokenize_cache_bytes", "Bytes the prompt token cache holds", value=cache.size_bytes)
        yield GaugeMetricFamily("maya:tokenize_cache_limit_bytes", "The prompt token cache's limit (tokenize_cache_mib)",
                                value=cache.limit_bytes)
        yield GaugeMetricFamily("maya:tokenize_cache_entries", "Text runs the prompt token cache holds", value=len(cache))
        yield CounterMetricFamily("maya:tokenize_cache_hits", "Prompt text runs found in the token cache", value=cache.hits)
        yield CounterMetricFamily("maya:tokenize_cache_misses", "Prompt text runs llama-server had to tokenize",
                                  value=cache.misses)
        yield CounterMetricFamily("maya:tokenize_cache_evictions", "Runs dropped from the token cache to stay in its limit",
                                  value=cache.evictions)
