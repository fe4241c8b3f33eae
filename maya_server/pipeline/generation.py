"""The generation pipeline shared by both APIs.

    conversation ─► images fetched, checked, decoded                  (load_images: may raise 400)
                ─► family.render ─► (too long for any tokenization?) ─► token ids ─► context check
                                                                       (prepare: may raise 400)
                   (an answer sent back as history: the ids it was generated as, spellings.py)
                   (the grammar the engine holds the turn to, constraint.py)
                ─► a place in the engine FIFO                          (admit: may raise 429)
                ─► engine slot ─► engine tokens ─► stop strings
                ─► family parser ─► tool policy ─► neutral events      (run)

Admission is its own step so that a route refuses a full queue before its
response starts. `run` yields the parser's events, then exactly one
`Finished` or `Failed`; with `report_progress` it first yields `PromptProgress`
(the engine's own, or a synthesized start and end for engines that report nothing).
Every parser event passes the request's `ToolPolicy` (`tool_policy.py`) before
it is yielded, so both APIs enforce tools the same way. Leaving the iteration
early (client gone) cancels the engine and releases the admission.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import uuid
from array import array
from dataclasses import dataclass, field
from typing import AsyncIterator

from ..neutral.conversation import Conversation, PartialTurn, ReasoningEffort, image_parts
from ..families.base import Family, StreamParser
from ..families.effort_tiers import check_effort
from ..engine.base import Engine, Generation, Sampling, SamplingParams
from ..engine.fifo import Admission, EngineQueue
from ..errors import ContextLengthExceeded, EngineError, InvalidRequestError, ToolPolicyError
from ..images.limits import ImageLimits
from ..images.loader import ImageLoader
from ..neutral.events import (
    Failed, Finished, PipelineEvent, PromptProgress, RawOutput, ReasoningDelta, TextDelta, ToolCallFinished,
    ToolCallStarted, Usage,
)
from ..metrics import Metrics
from ..model.spelling import respelled
from .cache_scope import SHARED_SCOPE, cache_salt
from .constraint import turn_grammar
from .context_bound import refuse_beyond_context
from .prepare_lanes import PrepareLanes
from .spellings import SpellingMemory, turn_key
from .stop_strings import StopStringMatcher
from .tool_policy import ToolPolicy


@dataclass(frozen=True)
class GenerationSettings(Sampling):
    """What a request asks of one generation: its sampling (`Sampling`'s fields) and what the pipeline does
    around the engine."""

    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    max_tool_calls: int | None = None
    """The turn ends once this many calls are complete; a call past it is never published."""
    report_progress: bool = False


@dataclass(frozen=True)
class PreparedGeneration:
    conversation: Conversation
    prompt_ids: list[int]
    params: SamplingParams
    stop: tuple[str, ...]
    max_tool_calls: int | None = None
    report_progress: bool = False
    images: tuple[bytes, ...] = ()
    image_positions: tuple[int, ...] = ()
    cache_scope: str = SHARED_SCOPE
    """Whose cached prompts and answers the generation may use (`cache_scope.py`)."""
    primer: str = ""
    """A turn cut short and continued (`Family.continuation`): the text the prompt ends with, which the parser
    reads first (its events were published already) so that it stands where the turn was cut."""
    continued_tokens: int = 0
    """The tokens of that text: counted as output, not prompt, and taken from the output limit."""
    grammar: str | None = None
    """What the engine holds the turn to while it writes (`pipeline/constraint.py`); None: nothing."""


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class GenerationService:
    """Runs conversations through one family and one engine behind one FIFO."""

    def __init__(self, engine: Engine, family: Family, queue: EngineQueue, metrics: Metrics,
                 images: ImageLoader | None = None, spellings: SpellingMemory | None = None, *,
                 isolate_caches: bool = False, lanes: PrepareLanes | None = None,
                 constrain: bool = True) -> None:
        self.engine = engine
        self.family = family
        self.queue = queue
        self.metrics = metrics
        self.images = images or ImageLoader(ImageLimits(), metrics)
        self.spellings = spellings
        """The ids of recent generations, to spell their turns with when they come back (None: off)."""
        self.isolate_caches = isolate_caches
        """Each owner (API key) its own cache scope (`cache_scope.py`); else one scope for all."""
        self.lanes = lanes or PrepareLanes(threads=2, max_waiting=64)
        """Where prompts are prepared off the event loop (`prepare_lanes.py`)."""
        self.constrain = constrain
        """Hold structured output and required calls to a grammar while the engine writes them
        (`pipeline/constraint.py`); validation before publishing holds either way."""
        self._stop_ids = frozenset(
            i for i in (engine.token_id(text) for text in family.stop_texts) if i is not None
        )
        self._single_tokens: dict[str, bool] = {}
        """Whether a text is one token of the engine's vocabulary, for the grammar's reasoning lead (a few texts
        at most: each family's own tags)."""

    def check_effort(self, effort: ReasoningEffort | None, param: str) -> None:
        """Refuse, with a 400 at `param`, an effort this service's family has no tier for (`max` outside
        DeepSeek, `families/effort_tiers.py`): called in a request's validation, before anything is stored."""
        check_effort(self.family, effort, param)

    def check_images(self, conversation: Conversation) -> None:
        """Refuse images before any work (400 at the image's param): the one place that asks whether the
        engine takes images at all, then their count and each URL's form (nothing is fetched)."""
        parts = image_parts(conversation)
        if not parts:
            return
        if not self.engine.accepts_images:
            self.metrics.image_rejections.labels("no_vision").inc()
            raise InvalidRequestError(f"Image inputs are not supported here: {self.engine.images_refusal}.",
                                      param=parts[0].param, code="images_not_supported")
        self.images.check(conversation)

    async def load_images(self, conversation: Conversation) -> Conversation:
        """Fetch and decode the conversation's images (400 at the image's param on any failure, 429 when the
        server's image memory is full); `check_images` first."""
        self.check_images(conversation)
        if not image_parts(conversation):
            return conversation
        return await self.images.load(conversation)

    async def prepare_async(self, conversation: Conversation, settings: GenerationSettings, *,
                            context_param: str = "messages", large: bool = False,
                            owner: str = SHARED_SCOPE, partial: PartialTurn | None = None) -> PreparedGeneration:
        """`prepare`, in a preparation lane's thread when it may block the event loop (`prepare_lanes.py`): a
        `large` request (its render is long: the large lane), or an engine whose tokenizer waits on I/O (the
        embedded engine asks llama-server for uncached runs)."""
        if large or self.engine.blocking_tokenizer:
            return await self.lanes.run(large, functools.partial(self.prepare, conversation, settings,
                                                                 context_param=context_param, owner=owner,
                                                                 partial=partial))
        return self.prepare(conversation, settings, context_param=context_param, owner=owner, partial=partial)

    def cache_scope(self, owner: str) -> str:
        """The cache scope of a request by `owner` (its API key's owner scope, `http/auth.py`)."""
        return owner if self.isolate_caches else SHARED_SCOPE

    def prepare(
        self, conversation: Conversation, settings: GenerationSettings, *, context_param: str = "messages",
        owner: str = SHARED_SCOPE, partial: PartialTurn | None = None,
    ) -> PreparedGeneration:
        """Render and tokenize; refuse (400, at `context_param`) what cannot fit the context. No engine call.
        Images must have been loaded (`load_images`); each takes the engine's `image_tokens` of context.
        What is looked up in caches is looked up in `owner`'s cache scope only. `partial`: the assistant's turn
        as far as it was published, continued (`Family.continuation`)."""
        scope = self.cache_scope(owner)
        tokenizer = self.engine.scoped_tokenizer(scope)
        images = tuple(p.data for p in image_parts(conversation))
        prompt = self.family.render(conversation)
        engine = self.engine
        refuse_beyond_context(prompt, max_token_bytes=engine.max_token_bytes, image_tokens=engine.image_tokens,
                              context=engine.context_size, max_tokens=settings.max_tokens, param=context_param)
        if self.spellings is not None and not images:  # an image prompt reaches llama-server as text: ids unused
            prompt = respelled(prompt, tokenizer, functools.partial(self.spellings.recall, self.engine.tokenizer, scope))
        prompt_ids, positions = prompt.tokenize(tokenizer)
        primer, continued = "", 0
        if partial is not None and partial.items:
            written = self.family.continuation(conversation, partial)
            written_ids = written.token_ids(tokenizer)
            primer, continued = written.text, len(written_ids)
            prompt_ids = prompt_ids + written_ids
            if settings.max_tokens is not None:  # the output limit counts what was written before the cut
                settings = dataclasses.replace(settings, max_tokens=max(1, settings.max_tokens - continued))
        if len(images) != len(positions) or any(data is None for data in images):
            raise EngineError("the conversation's images were not loaded before prepare")
        if images and prompt.plain_text_spells_control(tokenizer):
            # an image prompt reaches llama-server as text, where such a spelling would become a control token
            self.metrics.image_rejections.labels("control_text").inc()
            raise InvalidRequestError(
                "A request with images cannot contain text that spells one of the model's special tokens "
                "(such as a turn marker): the engine takes image prompts as text and would read it as that "
                "token. Remove the special-token text, or send the text without images.",
                param=context_param, code="special_token_text_with_images",
            )
        prompt_tokens = len(prompt_ids) + len(images) * self.engine.image_tokens
        context = self.engine.context_size
        room = context - prompt_tokens
        if settings.max_tokens is not None and settings.max_tokens > room:
            raise ContextLengthExceeded(
                f"This model's maximum context length is {context} tokens. However, you requested "
                f"{prompt_tokens + settings.max_tokens} tokens ({prompt_tokens} in the messages, "
                f"{settings.max_tokens} in the completion). Please reduce the length of the messages or completion.",
                param=context_param,
            )
        if room <= 0:
            raise ContextLengthExceeded(
                f"This model's maximum context length is {context} tokens, and the messages alone "
                f"take {prompt_tokens} tokens. Please reduce the length of the messages.",
                param=context_param,
            )
        params = SamplingParams(
            **settings.sampling(),
            max_tokens=settings.max_tokens if settings.max_tokens is not None else room,
            stop_token_ids=self._stop_ids,
        )
        grammar = turn_grammar(conversation, self.family, self._is_token) if self.constrain and not primer else None
        return PreparedGeneration(conversation, prompt_ids, params, settings.stop, settings.max_tool_calls,
                                  settings.report_progress, images, positions, scope, primer, continued, grammar)

    def _is_token(self, text: str) -> bool:
        known = self._single_tokens.get(text)
        if known is None:
            known = self._single_tokens[text] = self.engine.token_id(text) is not None
        return known

    def admit(self, *, bounded: bool = True) -> Admission:
        """A place in the engine queue, taken before the response starts (429 when full and `bounded`).
        `run` releases it; a caller that never runs it releases it itself."""
        return self.queue.admit(bounded=bounded)

    async def run(self, prepared: PreparedGeneration, admission: Admission, *,
                  raw_output: bool = False) -> AsyncIterator[PipelineEvent]:
        """The generation's events; `raw_output`: with a `RawOutput` before the events each piece of the model's
        text made (a background task's log keeps them, to write a cut turn back as the model wrote it)."""
        generation = Generation(prompt_ids=prepared.prompt_ids, params=prepared.params,
                                report_progress=prepared.report_progress, images=prepared.images,
                                image_positions=prepared.image_positions, cache_salt=cache_salt(prepared.cache_scope),
                                grammar=prepared.grammar)
        state = _RunState(
            generation=generation,
            cache_scope=prepared.cache_scope,
            parser=self.family.parser(prepared.conversation, new_call_id),
            stops=StopStringMatcher(prepared.stop),
            policy=ToolPolicy(prepared.conversation, prepared.max_tool_calls),
            continued_tokens=prepared.continued_tokens,
        )
        if prepared.primer:  # published before the cut: only the parser's and the policy's states move on
            for event in state.parser.feed(prepared.primer):
                state.policy.check(event)
        if raw_output:
            state.parser.record_raw()
            state.raw_output = True
        events = self._generate(state)
        try:
            await admission.wait()
            async for event in events:
                yield event
        finally:
            generation.cancel()  # no-op when finished; stops the engine when our reader left
            try:
                await events.aclose()  # the engine's stream closes now, not when the collector finds it
            finally:
                admission.release()
                self._count(state)

    async def _generate(self, state: "_RunState") -> AsyncIterator[PipelineEvent]:
        started = time.perf_counter()
        synthesized = _SynthesizedProgress(state.generation, started) if self._synthesizes_progress(state) else None
        if synthesized is not None:
            yield synthesized.start()
        tokens = self.engine.generate(state.generation)
        awaiting_first = True
        try:
            async for token in tokens:
                if isinstance(token, PromptProgress):
                    yield token
                    continue
                if synthesized is not None:
                    yield synthesized.end()
                    synthesized = None
                if awaiting_first:  # the first token yielded, whatever count an upstream's first chunk brought
                    self.metrics.first_token_seconds.observe(time.perf_counter() - started)
                    awaiting_first = False
                if token.ids is None:
                    state.generated_ids.append(token.id)
                else:  # a read's tokens as one piece, or text held back with no id of its own
                    state.generated_ids.extend(token.ids)
                events = _with_raw(state, state.parser.feed(state.stops.feed(token.text)))
                for event in events:
                    if isinstance(event, ReasoningDelta):
                        state.reasoning_tokens += 1
                        break
                for event in events:
                    failure = state.policy.check(event)
                    if failure is not None:
                        yield Failed(failure, state.usage())
                        return
                    if state.policy.over_limit:
                        break  # a call past the limit is dropped with whatever follows it
                    yield state.published(event)
                    if state.policy.done:
                        break  # the turn is over; nothing after its last call is published
                if state.stops.matched or state.policy.done:
                    break
        except EngineError as exc:
            yield Failed(exc, state.usage())
            return
        finally:
            await tokens.aclose()  # closing the engine's stream stops it, whoever ended the turn
        if synthesized is not None:
            yield synthesized.end()  # a turn that produced no token still finished its prompt
        if state.stops.matched or state.policy.done:
            state.ended_by_pipeline = True  # we ended the turn, not the client
        for event in self._finish(state):
            if isinstance(event, Finished):
                self._remember(state)  # before the client can send the turn back
            yield state.published(event)

    def _synthesizes_progress(self, state: "_RunState") -> bool:
        return state.generation.report_progress and not self.engine.reports_prompt_progress

    @staticmethod
    def _finish(state: "_RunState") -> list[PipelineEvent]:
        ended_by_limit = state.generation.stats.finish_reason == "length"
        rest: list[PipelineEvent] = []
        if not state.policy.over_limit:  # a turn ended at a call limit drops what the model wrote after it
            tail = _with_raw(state, state.parser.feed(state.stops.flush())) if not state.stops.matched else []
            rest = tail + _with_raw(state, state.parser.finish("length" if ended_by_limit else "stop"))
        events: list[PipelineEvent] = []
        for event in rest:
            failure = state.policy.check(event)
            if failure is not None:
                return events + [Failed(failure, state.usage())]
            events.append(event)
        if ended_by_limit:
            events.append(Finished("length", state.usage()))
        elif state.policy.calls_finished:
            events.append(Finished("tool_calls", state.usage()))
        elif state.policy.requires_call:
            events.append(Failed(ToolPolicyError("the model did not produce the required tool call"), state.usage()))
        else:
            events.append(Finished("stop", state.usage()))
        return events

    def _remember(self, state: "_RunState") -> None:
        """Keep the ids of a finished turn under what it published, for when it comes back as history."""
        if state.continued_tokens:  # a continued turn's ids are only the rest of it
            return
        if self.spellings is not None and state.generated_ids and min(state.generated_ids) >= 0:  # < 0: text only
            calls = [tuple(call) for call in state.calls.values()]
            self.spellings.remember(self.engine.tokenizer, state.cache_scope, turn_key("".join(state.text), calls),
                                    state.generated_ids)

    def _count(self, state: "_RunState") -> None:
        stats = state.generation.stats
        self.metrics.prompt_tokens.inc(stats.prompt_tokens)
        self.metrics.cached_tokens.inc(stats.cached_tokens)
        self.metrics.generated_tokens.inc(stats.generated_tokens)
        self.metrics.generations.labels(state.finish_reason).inc()
        if state.generation.grammar is not None:
            self.metrics.constrained_generations.inc()


def _with_raw(state: "_RunState", events: list[PipelineEvent]) -> list[PipelineEvent]:
    """`events`, the parser's answer to one call, with each piece of text it read meanwhile (`take_raw`) as a
    `RawOutput` before the first event the piece made, when the run publishes them (`GenerationService.run`)."""
    pieces = state.parser.take_raw() if state.raw_output else None
    if not pieces:
        return events
    merged: list[PipelineEvent] = []
    pieces_at = iter(pieces)
    piece = next(pieces_at, None)
    for position, event in enumerate(events):
        while piece is not None and piece[0] <= position:
            merged.append(RawOutput(piece[1], piece[2]))
            piece = next(pieces_at, None)
        merged.append(event)
    while piece is not None:
        merged.append(RawOutput(piece[1], piece[2]))
        piece = next(pieces_at, None)
    return merged


@dataclass
class _RunState:
    generation: Generation
    parser: StreamParser
    stops: StopStringMatcher
    policy: "ToolPolicy"
    cache_scope: str = SHARED_SCOPE
    reasoning_tokens: int = 0
    generated_ids: array = field(default_factory=lambda: array("i"))
    """Every id the engine generated for the turn, for `SpellingMemory` (an upstream that sends text only gives
    each piece a negative id: such a turn is not remembered)."""
    text: list[str] = field(default_factory=list)
    """The text published, and the calls published (index → [name, arguments]): the turn as it comes back."""
    calls: dict[int, list[str]] = field(default_factory=dict)
    continued_tokens: int = 0
    """A continued turn's tokens written before the cut (`PreparedGeneration.continued_tokens`)."""
    raw_output: bool = False
    """Whether the parser's raw pieces are published as `RawOutput` events (`GenerationService.run`)."""
    ended_by_pipeline: bool = False
    """The pipeline ended the turn (a stop string, the tool policy) and closed the engine, whose own record
    then says `cancelled`: the turn's outcome is `stop`."""

    def published(self, event: PipelineEvent) -> PipelineEvent:
        """Note what `event` adds to the turn as published; returns it."""
        if isinstance(event, TextDelta):
            self.text.append(event.text)
        elif isinstance(event, ToolCallStarted):
            self.calls[event.index] = [event.name, ""]
        elif isinstance(event, ToolCallFinished) and event.index in self.calls:
            self.calls[event.index][1] = event.arguments
        return event

    @property
    def finish_reason(self) -> str:
        """The turn's outcome for the `generations` metric: ours when we ended it, else the engine's."""
        return "stop" if self.ended_by_pipeline else self.generation.stats.finish_reason or "cancelled"

    def usage(self) -> Usage:
        stats = self.generation.stats
        prompt = max(0, stats.prompt_tokens - self.continued_tokens)
        return Usage(prompt, min(stats.cached_tokens, prompt), stats.generated_tokens + self.continued_tokens,
                     self.reasoning_tokens)


class _SynthesizedProgress:
    """Prompt progress for an engine that reports none: nothing processed when the generation starts,
    the whole prompt (with the engine's cached count) once its first token arrives."""

    def __init__(self, generation: Generation, started: float) -> None:
        self._generation = generation
        self._started = started

    def start(self) -> PromptProgress:
        return PromptProgress(total=len(self._generation.prompt_ids), cache=0, processed=0, time_ms=0)

    def end(self) -> PromptProgress:
        total = len(self._generation.prompt_ids)
        cache = min(self._generation.stats.cached_tokens, total)
        elapsed_ms = int((time.perf_counter() - self._started) * 1000)
        return PromptProgress(total=total, cache=cache, processed=total, time_ms=elapsed_ms)
