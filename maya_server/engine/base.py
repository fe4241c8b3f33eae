"""The engine boundary: prompt token ids in, a stream of generated tokens out.

An engine knows nothing of chat formats or HTTP. Example::

    generation = Generation(prompt_ids=[1, 2, 3], params=SamplingParams(max_tokens=16))
    async for token in engine.generate(generation):
        print(token.id, token.text)
    generation.stats.finish_reason   # "stop" | "length" | "cancelled" | "error"

`generation.cancel()` may be called from anywhere (another task, another
thread); the engine stops within one token and finishes with `cancelled`.
Failures are raised as `EngineError`, never as a lower-layer exception.

An engine implements `_stream`: it yields its tokens (and `PromptProgress`),
says what it knows of the counts with `Counts`, and ends with `Finish` when it
ended the sequence itself. `generate` keeps `generation.stats` from that, the
one place they are written: a token yielded is a token generated (unless the
engine gives its own count), a stream left early is `cancelled`, an
`EngineError` escaping it is `error`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields
from typing import AsyncIterator, Literal, Sequence, Union

from ..errors import EngineError
from ..neutral.events import PromptProgress
from ..model.tokenizer import Tokenizer

EngineFinishReason = Literal["stop", "length"]
"""How an engine ends a sequence itself (`Finish`); `cancelled` and `error` are `Engine.generate`'s."""
FinishReason = Literal[EngineFinishReason, "cancelled", "error"]
DEFAULT_CTX = 4096
"""The context when none is configured and the engine knows none: the scripted engine's, a model file without
its training context, an upstream that reports none."""


DEFAULT_TEMPERATURE = 1.0
"""OpenAI's default temperature: what a request that names none gets (and what its response reports)."""
DEFAULT_TOP_P = 1.0
"""OpenAI's default nucleus: the whole distribution."""


@dataclass(frozen=True)
class Sampling:
    """How the next token is drawn, in OpenAI's terms and with OpenAI's defaults. Declared once, here: what a
    request asks (`pipeline.generation.GenerationSettings`) and what an engine is sent (`SamplingParams`) both
    extend it, and one becomes the other with `sampling()`."""

    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    """OpenAI's penalties (-2..2) on tokens already generated: once present, and per occurrence."""
    seed: int | None = None

    def sampling(self) -> dict[str, object]:
        """The `Sampling` fields and their values, to build another kind of `Sampling` from."""
        return {f.name: getattr(self, f.name) for f in fields(Sampling)}


@dataclass(frozen=True)
class SamplingParams(Sampling):
    max_tokens: int = field(kw_only=True)
    stop_token_ids: frozenset[int] = frozenset()
    """Tokens that end the turn besides the model's own end-of-generation tokens; never yielded."""


@dataclass(frozen=True)
class GeneratedToken:
    id: int
    text: str
    """The decoded text piece; multi-byte characters split over tokens arrive whole in a later piece."""
    ids: Sequence[int] | None = None
    """Every id the piece stands for, in order, where that is not `id` alone: a read's tokens relayed as one piece
    (`id` is their last), or `()` for held-back text flushed at the end, which brings no id of its own. The
    pipeline keeps them all: a turn comes back as history spelled with exactly the ids generated
    (`pipeline/spellings.py`)."""

    @property
    def all_ids(self) -> Sequence[int]:
        return (self.id,) if self.ids is None else self.ids


@dataclass
class GenerationStats:
    """A sequence's counts and finish reason, kept by `Engine.generate` alone and read by the pipeline
    (while it streams, for the first token's time and a failure's usage; once it ends, for usage and metrics)."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    generated_tokens: int = 0
    finish_reason: FinishReason | None = None


@dataclass
class Generation:
    """One sequence: its prompt, its settings, a cancel flag and its counts."""

    prompt_ids: list[int]
    params: SamplingParams
    stats: GenerationStats = field(default_factory=GenerationStats)
    report_progress: bool = False
    """Ask an engine that `reports_prompt_progress` to yield `PromptProgress` before the first token."""
    images: tuple[bytes, ...] = ()
    """Images (PNG, scaled and re-encoded by Maya) for an engine that `accepts_images`; image `i` goes before `prompt_ids[image_positions[i]]`."""
    image_positions: tuple[int, ...] = ()
    cache_salt: str | None = None
    """The cache scope of the key that sent it, as a salt (`pipeline/cache_scope.py`); None: the caches are
    shared. An engine reuses only cached prompts of the same salt: vLLM and SGLang are told it (`cache_salt`), a
    llama-server slot that holds another salt's sequence is not reused (`slot_choice.py`)."""
    grammar: str | None = None
    """A GBNF grammar the whole generated text must follow (`pipeline/constraint.py`), for an engine that takes
    one (`describe_grammar`); others ignore it, and what they write is still validated before it is published."""
    cancelled: bool = field(default=False, init=False, repr=False)
    """Set by `cancel`, from any thread (a plain attribute: engines read it at every token, and nothing waits
    on it, so an Event's lock would buy nothing)."""

    def cancel(self) -> None:
        self.cancelled = True


def reusable_prefix_length(previous: Sequence[int], prompt: Sequence[int]) -> int:
    """Prompt tokens an engine need not evaluate again: the prefix shared with the previous
    sequence, short of the prompt's last token (which must be evaluated to sample the next)."""
    n = 0
    for a, b in zip(previous, prompt[:-1]):
        if a != b:
            break
        n += 1
    return n


@dataclass(frozen=True)
class Counts:
    """What an engine has learnt of its counts, yielded by `_stream` whenever it learns it; None leaves a count
    as it was. Never reaches the pipeline: `generate` keeps it in `generation.stats`."""

    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    """Prompt tokens reused from the engine's cache (not evaluated again)."""
    generated_tokens: int | None = None
    """The engine's own count (an upstream's usage): once given, it replaces the count of yielded tokens."""


@dataclass(frozen=True)
class Finish:
    """The engine ended the sequence itself: an end-of-generation or stop token (`stop`), `max_tokens`
    (`length`). The last thing `_stream` yields; a stream that ends without it was cancelled."""

    reason: EngineFinishReason


EngineOutput = Union[GeneratedToken, PromptProgress]
StreamItem = Union[GeneratedToken, PromptProgress, Counts, Finish]


class Engine(ABC):
    """An engine: a tokenizer, a context size, a slot count and its own `_stream`; `generate`, the same for
    every engine, is what the pipeline calls."""

    name: str
    context_size: int
    slots: int = 1
    tokenizer: Tokenizer
    reports_prompt_progress: bool = False
    """Whether `generate` yields `PromptProgress` when `generation.report_progress` asks (else the pipeline
    synthesizes it)."""
    chat_template: str | None = None
    """The chat template the engine read from its model (a GGUF's, a model directory's, an upstream's `/props`),
    as text; None when it has none. The engine only reports it: which family it names is decided at the edge
    (`engine_setup.template_family`)."""
    model_type: str | None = None
    """The `model_type` of the model folder's `config.json` (`--tokenizer DIR`), None without one: with the
    vocabulary, what tells a model whose template cannot (DeepSeek-V4.1 ships none) at the edge
    (`engine_setup.detect_model_family`)."""
    accepts_images: bool = False
    """Whether `generate` takes `Generation.images` (llama-server with a multimodal projector)."""
    images_refusal: str = "this engine takes text prompts only"
    """Why images are refused here, and what would enable them (the 400's message); the embedded engine's
    remedy is a Maya setting, which the edge (`engine_setup`) adds."""
    image_tokens: int = 0
    """Context positions one image takes (measured at start-up), for the context check before generation."""
    max_token_bytes: int | None = None
    """The most bytes of prompt text one token can stand for (None: unknown). A prompt of `n` bytes takes at least
    `n / max_token_bytes` tokens, so one whose length alone rules the context out is refused before it is
    tokenized (`pipeline/context_bound.py`)."""
    blocking_tokenizer: bool = False
    """Whether `tokenizer.encode` may wait on I/O (the embedded engine asks llama-server), so prompts are
    prepared off the event loop."""

    async def generate(self, generation: Generation) -> AsyncIterator[EngineOutput]:
        """Stream the tokens of `generation` (and its `PromptProgress`), keeping `generation.stats` as they pass.
        Closing this iterator closes the engine's stream at once (an upstream request, a scripted replay)."""
        stats = generation.stats
        engine_counts = False
        items = self._stream(generation)
        try:
            async for item in items:
                if isinstance(item, GeneratedToken):
                    if not engine_counts:
                        stats.generated_tokens += 1
                    yield item
                elif isinstance(item, Counts):
                    engine_counts = _keep_counts(stats, item) or engine_counts
                elif isinstance(item, Finish):
                    stats.finish_reason = item.reason
                else:
                    yield item  # PromptProgress
        except EngineError:
            stats.finish_reason = "error"
            raise
        finally:
            await items.aclose()
            if stats.finish_reason is None:
                stats.finish_reason = "cancelled"

    @abstractmethod
    def _stream(self, generation: Generation) -> AsyncIterator[StreamItem]:
        """The engine's own stream: tokens, `PromptProgress` when asked, `Counts` when it learns them, and a
        final `Finish`; it stops (returns without `Finish`) once `generation.cancelled`."""

    def scoped_tokenizer(self, scope: str) -> Tokenizer:
        """The tokenizer a request in cache `scope` tokenizes with: the engine's own, or (an engine that caches
        what it tokenized, the embedded one) a view whose cache holds that scope's runs only."""
        return self.tokenizer

    def token_id(self, text: str) -> int | None:
        """The id of a single special token, or None when the vocabulary has no such token."""
        ids = self.tokenizer.encode(text, special=True)
        return ids[0] if len(ids) == 1 else None

    def describe_grammar(self) -> dict:
        """How this engine holds a generation to `Generation.grammar`, for /v1/status (`mechanism` None: it does
        not, and `why_not` says why)."""
        return {"mechanism": None, "why_not": f"the {self.name} engine takes no grammar"}

    def describe(self) -> dict:
        """Facts for /v1/status."""
        return {"name": self.name, "context_size": self.context_size, "slots": self.slots,
                "vision": {"enabled": self.accepts_images, "image_tokens": self.image_tokens}
                if self.accepts_images else {"enabled": False, "why_not": self.images_refusal}}

    def metric_collectors(self) -> list:
        """Prometheus collectors of the engine's own state (an upstream's health, the embedded engine's child
        process), read at scrape time; each app registers them in its own registry."""
        return []

    def begin_serving(self) -> None:
        """Begin what the engine watches while the app serves (a replica set's checks); called on the event loop
        when the app starts, `close` when it stops."""

    def share_affinity(self, shared) -> bool:
        """Route with the prefix affinity several Maya replicas share (`engine/shared_affinity.SharedAffinity`;
        None: stop); True if this engine routes among replicas by affinity and took it."""
        return False

    async def close(self) -> None:
        """Release the engine's resources."""

    def shutdown(self) -> None:
        """Stop what the engine runs outside the event loop (the embedded engine's child process);
        called once the server is done, also after a failed start."""


def _keep_counts(stats: GenerationStats, counts: Counts) -> bool:
    """Keep what `counts` says in `stats`; True when it gave the engine's own count of generated tokens."""
    if counts.prompt_tokens is not None:
        stats.prompt_tokens = counts.prompt_tokens
    if counts.cached_tokens is not None:
        stats.cached_tokens = counts.cached_tokens
    if counts.generated_tokens is None:
        return False
    stats.generated_tokens = counts.generated_tokens
    return True
