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
from array import array
from copy import copy
from typing import Sequence

import httpx

from ...errors import PromptTooLarge, UpstreamError, UpstreamUnavailable
from ...model.gguf_vocabulary import GgufVocabulary
from ...util.ids_cache import IdsCache, IdsCacheCollector, scope_bytes
from ..defaults import TOKENIZE_TIMEOUT_S

class TokenCache(IdsCache[tuple[str, str, bool]]):
    """Text runs' token ids by (cache scope, text, special), in `IdsCache`'s bounds."""

    def __init__(self, limit_bytes: int) -> None:
        super().__init__(limit_bytes, key_bytes=lambda key: scope_bytes(key[0]) + sys.getsizeof(key[1]))

    def get(self, text: str, special: bool, scope: str = "") -> list[int] | None:
        ids = self.lookup((scope, text, special))
        return ids.tolist() if ids is not None else None

    def put(self, text: str, special: bool, ids: Sequence[int], scope: str = "") -> None:
        self.keep((scope, text, special), array("i", ids))


class LlamaServerTokenizer:
    """A `Tokenizer` backed by a running llama-server. Example::

        tokenizer = LlamaServerTokenizer(GgufVocabulary(metadata), client, TokenCache(64 << 20))
        tokenizer.encode("<|user|>", special=True)    # [its id], from the vocabulary
        tokenizer.encode("<|user|>", special=False)   # several ordinary tokens, from llama-server
    """

    def __init__(self, vocabulary: GgufVocabulary, client: httpx.Client, cache: TokenCache, *,
                 timeout: float = TOKENIZE_TIMEOUT_S) -> None:
        self.vocabulary = vocabulary
        self.cache = cache
        self._client = client
        self._timeout = timeout
        """Seconds one `/tokenize` call may take: past it the prompt is `PromptTooLarge`, the client's to
        shorten (a huge run costs the child seconds of CPU per megabyte), never an engine fault."""
        self.scope = ""
        """The cache scope whose runs this tokenizer finds and keeps (`scoped`)."""

    def scoped(self, scope: str) -> "LlamaServerTokenizer":
        """This tokenizer for a request in cache `scope`: the same vocabulary, client and cache, but it finds
        and keeps that scope's runs only."""
        if scope == self.scope:
            return self
        view = copy(self)
        view.scope = scope
        return view

    def encode(self, text: str, *, special: bool) -> list[int]:
        if special:
            token_id = self.vocabulary.special_id(text)
            if token_id is not None:
                return [token_id]
        ids = self.cache.get(text, special, self.scope)
        if ids is None:
            ids = self.engine_tokens(text, special=special)
            self.cache.put(text, special, ids, self.scope)
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
                                                             "parse_special": special}, timeout=self._timeout)
        except httpx.TimeoutException:
            raise PromptTooLarge(
                f"The prompt could not be split into tokens within {self._timeout:g} seconds (--tokenize-timeout). "
                "Send a shorter prompt.") from None
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


class TokenCacheCollector(IdsCacheCollector):
    """`maya:tokenize_cache_*`: the cache's size against its limit, its hits, misses and evictions."""

    def __init__(self, cache: TokenCache) -> None:
        super().__init__(cache, "maya:tokenize_cache", "prompt text runs", "tokenize_cache_mib")
