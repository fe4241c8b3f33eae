"""The embedded engine: llama.cpp in-process, through llama-cpp-python.

The model loads once at start-up. Decoding runs on one dedicated thread (a
llama.cpp context is not thread-safe, and the event loop must stay free), one
token per hop, so a cancel is seen within one token.

The context keeps the KV of the previous sequence; with `kv_states` it also
keeps copies of earlier conversations' KV (see `kv_states.py`), so interleaved
conversations each resume from their own prefix. Before each prompt the engine
keeps or restores the longest reusable prefix, trims the KV to it and
evaluates only the rest: `cached_tokens` is exactly the prompt tokens skipped.
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import AsyncIterator, Iterator, Sequence

from ..errors import EngineError
from .base import Engine, GeneratedToken, Generation
from .kv_state_collector import KvStateCollector
from .kv_states import KvStateCache, KvStateStats, Plan

log = logging.getLogger("maya.engine")


class LlamaTokenizer:
    """The model's own vocabulary, as llama.cpp reads it from the GGUF."""

    def __init__(self, llama) -> None:
        self._llama = llama

    def encode(self, text: str, *, special: bool) -> list[int]:
        return self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=special)

    def decode(self, ids: Sequence[int]) -> str:
        return self._llama.detokenize(list(ids), special=True).decode("utf-8", errors="replace")


class LlamaCppEngine(Engine):
    name = "llamacpp"
    slots = 1

    def __init__(
        self, model_path: str, *, context_size: int, threads: int = 0, kv_states: KvStateCache | None = None
    ) -> None:
        from llama_cpp import Llama  # imported here: the scripted and upstream engines never need it

        from .llama_sequence import LlamaSequence

        started = time.perf_counter()
        log.info("loading model %s (context %d)", model_path, context_size)
        self._llama = Llama(
            model_path=model_path,
            n_ctx=context_size,
            n_threads=threads or None,
            n_batch=512,
            verbose=False,
        )
        self.model_path = model_path
        self.context_size = context_size
        self.tokenizer = LlamaTokenizer(self._llama)
        self._sequence = LlamaSequence(self._llama)
        self._states: KvStateCache = kv_states if kv_states is not None else KvStateCache(0, 0)
        self._end_of_generation = self._eog_ids()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llamacpp")
        log.info("model loaded in %.2fs", time.perf_counter() - started)

    def _eog_ids(self) -> frozenset[int]:
        import llama_cpp

        vocab = llama_cpp.llama_model_get_vocab(self._llama.model)
        n_vocab = self._llama.n_vocab()
        return frozenset(i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i))

    def describe(self) -> dict:
        return {**super().describe(), "model_path": self.model_path, "kv_states": asdict(self._states.snapshot())}

    def kv_state_stats(self) -> KvStateStats:
        return self._states.snapshot()

    def metric_collectors(self) -> list:
        return [KvStateCollector(self.kv_state_stats)]

    async def generate(self, generation: Generation) -> AsyncIterator[GeneratedToken]:
        loop = asyncio.get_running_loop()
        stats = generation.stats
        params = generation.params
        stats.prompt_tokens = len(generation.prompt_ids)
        if not generation.prompt_ids:
            raise EngineError("the prompt is empty")
        stop_ids = self._end_of_generation | params.stop_token_ids
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            tokens = await loop.run_in_executor(self._thread, self._start, generation)
        except Exception as exc:  # a failed restore or trim: the KV is unknown, forget it
            stats.finish_reason = "error"
            log.error("llama.cpp failed to prepare the KV: %s", type(exc).__name__)
            await loop.run_in_executor(self._thread, self._sequence.clear)
            raise EngineError("the engine failed while preparing the prompt") from exc
        try:
            while True:
                if generation.cancelled:
                    return
                if stats.generated_tokens >= params.max_tokens:
                    stats.finish_reason = "length"
                    return
                token_id = await loop.run_in_executor(self._thread, _next_token, tokens)
                if token_id in stop_ids:
                    stats.finish_reason = "stop"
                    return
                stats.generated_tokens += 1
                piece = decoder.decode(self._llama.detokenize([token_id], special=True))
                yield GeneratedToken(token_id, piece)
        except EngineError:
            stats.finish_reason = "error"
            raise
        except Exception as exc:  # llama.cpp failures are mapped here, at the boundary
            stats.finish_reason = "error"
            log.error("llama.cpp decode failed: %s", type(exc).__name__)
            raise EngineError("the engine failed while generating") from exc
        finally:
            if stats.finish_reason is None:
                stats.finish_reason = "cancelled"
            await loop.run_in_executor(self._thread, self._end, tokens, stats.finish_reason == "error")

    def _end(self, tokens: Iterator[int], failed: bool) -> None:
        """On the engine thread: close the token iterator; after a failure, forget the KV (a
        failed decode may have left it part-written) rather than save or reuse it."""
        tokens.close()
        if failed:
            self._sequence.clear()

    def _start(self, generation: Generation) -> Iterator[int]:
        """On the engine thread: bring the KV to the longest reusable prefix, count it as cached,
        set the seed and create the iterator that evaluates the rest of the prompt."""
        params = generation.params
        prompt = generation.prompt_ids
        reuse = self._prepare_kv(prompt)
        generation.stats.cached_tokens = reuse
        self._llama.set_seed(params.seed if params.seed is not None else random.randrange(2**31))
        return self._llama.generate(
            prompt[reuse:],
            temp=params.temperature,
            top_p=params.top_p,
            top_k=0 if params.temperature > 0 else 1,
            min_p=0.0,
            repeat_penalty=1.0,
            presence_penalty=params.presence_penalty,
            frequency_penalty=params.frequency_penalty,
            reset=False,  # the KV already holds exactly prompt[:reuse]
        )

    def _prepare_kv(self, prompt: list[int]) -> int:
        """Follow the cache's plan: save the live KV if it is about to be lost, restore a saved
        state if one shares more, trim to the reused prefix. Returns the tokens kept."""
        plan: Plan = self._states.plan(self._sequence.tokens(), prompt)
        if plan.save_live:
            self._save_live()
        if plan.restore is None:
            reuse = self._sequence.keep(plan.reuse)
            if self._states.enabled:
                self._states.kept_live(reuse)
            return reuse
        started = time.perf_counter()
        if not self._sequence.restore(plan.restore.key, plan.restore.state):
            log.warning("llama.cpp refused a saved KV state (%d tokens); evaluating cold", plan.restore.token_count)
            self._states.discard(plan.restore)
            self._states.kept_live(0)
            return 0
        self._states.restored(plan.restore, time.perf_counter() - started)
        return self._sequence.keep(plan.reuse)

    def _save_live(self) -> None:
        """Copy the live KV into the cache. Saving only speeds up a later turn, so a failure to
        copy (llama.cpp or memory) is logged and the generation goes on without it."""
        started = time.perf_counter()
        if not self._states.fits(self._sequence.state_size()):
            self._states.reject()  # larger than the whole budget: copying it would be wasted
            return
        try:
            buffer = self._sequence.save()
        except (RuntimeError, MemoryError) as exc:
            log.warning("could not save a KV state: %s", type(exc).__name__)
            return
        self._states.put(self._sequence.tokens(), buffer, len(buffer), time.perf_counter() - started)

    async def close(self) -> None:
        self._thread.shutdown(wait=True)
        self._llama.close()


def _next_token(tokens: Iterator[int]) -> int:
    try:
        return next(tokens)
    except StopIteration:
        raise EngineError("the engine stopped without an end-of-generation token") from None
