"""The upstream engine: vLLM, SGLang or llama-server over HTTP, as an `Engine`.

Maya keeps everything but the tokens: it renders and tokenizes the prompt with
the model directory's `tokenizer.json` (`--tokenizer DIR`), sends the ids as
the `prompt` of a streaming completion request (`/v1/completions`; llama-server's
own `/completion`), and turns the stream back into `GeneratedToken`s. Where the upstream sends the generated ids
(llama-server, vLLM) Maya decodes them itself, so reasoning and tool tags
survive whatever the upstream's special-token settings; otherwise the
upstream's text is used and each chunk counts as one token until the final
usage gives the real count. Turn-ending ids are never yielded: the upstream is
asked to stop on them (vLLM, SGLang) and Maya stops on them too (llama-server
stops on its model's end-of-generation tokens by itself).

A llama-server started with a multimodal projector (`/props` modalities) takes
images, on the same `/completion` (token ids, or `multimodal_prompt` when the
request has images; see `upstream_wire`). Every other engine refuses images
before generation with `images_refusal`.

Concurrency is the upstream's: `slots` sequences at once (its own
`total_slots`, else `--upstream-slots`, else 8). Leaving the stream (a client
gone, `generation.cancel()`) closes the HTTP request, which makes the upstream
drop the sequence. The stream itself is read by `event_stream.py` (a lean
HTTP/1.1 reader, which maps every lower-layer failure to an `UpstreamError`);
the tokens of one read go down the pipeline as one piece (`together`), and
while tokens flow (two or more per `batch_interval`) and other streams run,
the next read waits `batch_interval` so that more gather: one read, one pass
and one write to the client for several tokens at GPU rates (a slower stream
is read at once: waiting would gather nothing). `prefill_concurrency` (`prefill_gate.py`; default no
limit) can hold a request back until the prompts sent before it are processed. The key only ever travels in
the Authorization header.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable

import httpx
import orjson

from ...errors import EngineError, EngineOptionError, UpstreamError, UpstreamRejected, UpstreamUnavailable
from ...model.chat_template import template_from_model_dir
from ...model.model_config import model_type_from_dir
from ...model.hf_tokenizer import HfTokenizer
from ...model.tokenizer import Tokenizer
from ..base import DEFAULT_CTX, Counts, Engine, Finish, GeneratedToken, Generation, StreamItem
from ..defaults import CONNECT_TIMEOUT_S, READ_TIMEOUT_S
from .event_stream import DATA, ERROR, Endpoint, EventStream
from .grammar_support import GrammarRefusalsCollector, GrammarSupport
from ..prefill_gate import PrefillGate, PrefillGateCollector
from .slot_choice import SlotChooser, SlotChooserCollector
from .health import UpstreamCollector, UpstreamHealth, public_url
from .probe import UpstreamInfo, measure_image_tokens, probe_upstream
from .stream import TokenStream
from .wire import (
    NATIVE_PATH, TokenRun, completion_request, error_from_response, multimodal_prompt, native_completion_request,
    parse_error_event, parse_event, parse_native_event, token_run,
)

log = logging.getLogger("maya.engine")

DEFAULT_SLOTS = 8
"""Sequences sent at once when the upstream reports no capacity (vLLM and SGLang batch far more)."""
ERROR_BODY_LIMIT = 65536


@dataclass(frozen=True)
class UpstreamOptions:
    """What `UpstreamEngine.connect` needs to meet an upstream; `engine_setup` fills it from the settings."""

    url: str
    tokenizer_dir: str
    """The model directory with its `tokenizer.json` (and chat template)."""
    key: str | None = field(default=None, repr=False)
    model: str | None = None
    """The model name sent in requests, instead of the one the upstream reports."""
    slots: int | None = None
    """Sequences at once, instead of the upstream's own `total_slots` (else `DEFAULT_SLOTS`)."""
    context_size: int | None = None
    """The context, instead of the upstream's own (else `DEFAULT_CTX`)."""
    connect_timeout: float = CONNECT_TIMEOUT_S
    read_timeout: float = READ_TIMEOUT_S


class UpstreamEngine(Engine):
    name = "upstream"

    def __init__(
        self,
        url: str,
        tokenizer: Tokenizer,
        info: UpstreamInfo,
        *,
        slots: int,
        context_size: int,
        key: str | None = None,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        read_timeout: float = READ_TIMEOUT_S,
        uds: str | None = None,
    ) -> None:
        """`uds`: reach `url` over this Unix socket (the embedded engine's private llama-server)."""
        self.url = url.rstrip("/")
        self.tokenizer = tokenizer
        self.info = info
        self.slots = slots
        self.context_size = context_size
        self.health = UpstreamHealth(self.url)
        self._endpoint = Endpoint(self.url, uds, connect_timeout=connect_timeout, read_timeout=read_timeout)
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.batch_interval = 0.0
        """Seconds the next read of a stream waits while its tokens flow (a read brought several, or came within
        half of this after the last) and other streams run too, so the tokens in between arrive together (a lone
        stream is read at once: there is nothing to share the process with)."""
        self._streaming = 0
        self.prefill_gate = PrefillGate(0)
        """Every prompt sent at once unless `prefill_concurrency` says otherwise."""
        self.live: set = set()
        """The connections of requests in flight (`event_stream`), so that `fail_silent` can end their waits."""
        self.on_abandoned: Callable[[], None] | None = None
        """Called when a client left before the upstream sent anything back (a replica then checks at once)."""
        self.grammars = GrammarSupport(info.kind, self.health.url)
        """Whether the upstream takes the grammars generations are held to (`grammar_support.py`)."""
        self.slot_chooser = SlotChooser(slots, context_size) if info.kind == "llama-server" else None
        """llama-server takes `id_slot`: each request goes to the free slot that shares most of its prompt."""
        self.accepts_images = info.kind == "llama-server" and info.vision
        self.images_refusal = (
            "the upstream llama-server was started without a multimodal projector; start it with --mmproj FILE"
            if info.kind == "llama-server" else
            f"Maya sends {info.kind} token-id prompts through its completion endpoint, which carries no images; "
            "use llama-server with --mmproj (embedded: Maya's --mmproj FILE)")

    @classmethod
    def connect(cls, options: UpstreamOptions) -> "UpstreamEngine":
        """Load the tokenizer and meet the upstream; any failure is a one-line `EngineOptionError` naming the option
        (`tokenizer_dir`, `url`) whose value failed. The engine reports the chat template it finds (the model
        directory's, else the upstream's `/props`) as `chat_template`, and its `config.json` `model_type`."""
        try:
            tokenizer = HfTokenizer.from_model_dir(options.tokenizer_dir)
        except Exception as exc:  # tokenizers raises its own exception types for a malformed file
            where = Path(options.tokenizer_dir) / "tokenizer.json"
            raise EngineOptionError("tokenizer_dir", f"cannot load {where}: {exc}",
                                    value=options.tokenizer_dir) from None
        timeout = httpx.Timeout(options.connect_timeout, read=options.read_timeout)
        headers = {"Authorization": f"Bearer {options.key}"} if options.key else {}
        with httpx.Client(base_url=options.url, timeout=timeout, headers=headers) as client:
            try:
                info = probe_upstream(client)
            except UpstreamError as exc:
                raise EngineOptionError(
                    "url", f"{exc.message} at {public_url(options.url)}; is it running and ready?"
                ) from None
            if options.model is not None:
                info = replace(info, model=options.model)
            image_tokens = 0
            if info.vision and info.kind == "llama-server":
                try:
                    image_tokens = measure_image_tokens(client, info.media_marker)
                except UpstreamError as exc:
                    raise EngineOptionError("url", f"the upstream's image probe failed: {exc.message}") from None
        engine = cls(
            options.url, tokenizer, info,
            slots=options.slots or info.slots or DEFAULT_SLOTS,
            context_size=options.context_size or info.context_size or DEFAULT_CTX,
            key=options.key,
            connect_timeout=options.connect_timeout,
            read_timeout=options.read_timeout,
        )
        engine.image_tokens = image_tokens
        engine.health.checked(True)
        engine.chat_template = template_from_model_dir(options.tokenizer_dir) or info.chat_template
        engine.model_type = model_type_from_dir(options.tokenizer_dir)
        log.info("upstream %s (%s) at %s: %d slots, context %d",
                 info.model, info.kind, engine.health.url, engine.slots, engine.context_size)
        return engine

    @property
    def reports_prompt_progress(self) -> bool:
        """llama-server sends `prompt_progress` when asked; vLLM and SGLang have no such report."""
        return self.info.kind == "llama-server"

    @property
    def prefill_concurrency(self) -> int:
        """Requests in prompt processing at once (0: no limit; `prefill_gate.py`)."""
        return self.prefill_gate.limit

    @prefill_concurrency.setter
    def prefill_concurrency(self, limit: int) -> None:
        self.prefill_gate = PrefillGate(limit)

    def describe(self) -> dict:
        upstream = {"kind": self.info.kind, "model": self.info.model, **self.health.describe()}
        return {**super().describe(), "prefill_concurrency": self.prefill_concurrency, "upstream": upstream}

    def describe_grammar(self) -> dict:
        return self.grammars.describe()

    def metric_collectors(self) -> list:
        collectors: list = [UpstreamCollector(self.health, self.slots),
                            GrammarRefusalsCollector(lambda: [self.grammars]),
                            PrefillGateCollector(lambda: {self.health.url: self.prefill_gate})]
        if self.slot_chooser is not None:
            collectors.append(SlotChooserCollector(self.slot_chooser))
        return collectors

    async def _stream(self, generation: Generation) -> AsyncIterator[StreamItem]:
        yield Counts(prompt_tokens=len(generation.prompt_ids) + len(generation.images) * self.image_tokens)
        if not generation.prompt_ids:
            raise EngineError("the prompt is empty")
        if generation.images and not self.accepts_images:
            raise EngineError(f"images reached an engine that cannot take them: {self.images_refusal}")
        stop_ids = generation.params.stop_token_ids
        stream = TokenStream(self.tokenizer, stop_ids, generation.params.max_tokens,
                             text_mends_ids=self.info.kind == "llama-server")
        report_progress = generation.report_progress and self.reports_prompt_progress
        native = self.info.kind == "llama-server"  # its own endpoint: no `[DONE]`, its final chunk ends the stream
        slot = self._take_slot(generation)
        reuse = self._may_reuse(generation, slot)
        generated: list[int] = []
        pieces = 0  # tokens yielded (`together` makes one of a read's)
        grammar = generation.grammar if self.grammars.usable else None

        async def request_body(grammar: str | None) -> bytes:
            if not native:
                return orjson.dumps(completion_request(
                    self.info.kind, self.info.model, generation.prompt_ids, generation.params, stop_ids,
                    report_progress=report_progress, cache_salt=generation.cache_salt, grammar=grammar))
            # images are base64 in the body (tens of MB at most): encoded off the event loop
            if generation.images:
                return await asyncio.to_thread(self._native_body, generation, report_progress, slot, reuse, grammar)
            return self._native_body(generation, report_progress, slot, reuse, grammar)

        path, parse = (NATIVE_PATH, parse_native_event) if native else ("/v1/completions", parse_event)
        body = await request_body(grammar)
        outcome, failure = "cancelled", None
        answer, sent = None, False
        self._streaming += 1
        clock = asyncio.get_running_loop().time
        previous_read = float("-inf")  # the first read gathers only if it brought several tokens
        turn = self.prefill_gate.enter()  # held while the engine processes this prompt
        try:
            if turn is not None:
                await turn.wait()
            sent = True
            answer = await self._endpoint.post(path, body, self._headers, live=self.live)
            if grammar is not None:
                answer = await self._unless_grammar_refused(answer, path, request_body)
            if answer.status != 200:
                raise error_from_response(answer.status, await answer.read_body(ERROR_BODY_LIMIT))
            async for fields in answer.batches():
                tokens, finished = [], False
                run = None if stream.text_only else _token_run(fields, native)  # text without ids: never a run
                whole = run is not None and stream.takes_whole(run)  # a busy stream's every read but its last
                if whole:
                    tokens = [stream.feed_run(run)]  # one piece already: `together` keeps it
                    if slot is not None:
                        generated += run.ids
                for field, data in () if whole else fields:
                    if field == ERROR:
                        raise parse_error_event(data)
                    chunk = parse(data)
                    if chunk is None:
                        finished = True
                        break
                    if chunk.prompt_tokens is not None and generation.images:
                        yield Counts(prompt_tokens=chunk.prompt_tokens)  # the engine's count of the image tokens
                    if chunk.prompt_progress is not None:
                        yield chunk.prompt_progress
                        continue
                    tokens += stream.feed(chunk)
                    if slot is not None and chunk.token_ids:
                        generated += chunk.token_ids
                    if stream.ended_by_us or generation.cancelled or (native and chunk.finish_reason is not None):
                        finished = True
                        break
                if turn is not None and (tokens or finished):  # the prompt is processed: the next may go
                    turn.release()
                    turn = None
                pieces += bool(tokens)
                news = stream.counts_news(pieces)
                if news is not None:
                    yield news
                if tokens:
                    yield together(tokens)
                if finished or generation.cancelled:
                    break
                if tokens and self.batch_interval and self._streaming > 1:
                    now = clock()
                    # a wait gathers several tokens only if they come at least two a wait apart
                    flowing = whole or len(tokens) > 1 or now - previous_read < self.batch_interval / 2
                    previous_read = now
                    if flowing:  # the next tokens pile up meanwhile: one read, one pass for all of them
                        answer.gather(self.batch_interval)
            if generation.cancelled and stream.finish_reason is None:
                return
            reason = stream.finish()
            outcome = "ok"
            yield stream.counts()  # a text-only stream's count is the upstream's own, known only now
            yield Finish(reason)
        except UpstreamRejected:
            outcome = "rejected"
            raise
        except UpstreamError as exc:
            outcome, failure = "failed", exc.message
            log.warning("upstream request failed: %s", exc.message)
            raise
        except Exception as exc:  # anything else is mapped here too, at the boundary
            outcome, failure = "failed", type(exc).__name__
            log.error("upstream stream handling failed: %s", type(exc).__name__)
            raise UpstreamError("the upstream engine's stream could not be handled") from exc
        finally:
            if turn is not None:
                turn.release()
            self._streaming -= 1
            if answer is not None:
                answer.close()
            if outcome == "cancelled" and sent and answer is None:
                outcome = "abandoned"  # the client gave up on an engine that had not begun to answer
            self.health.record(outcome, failure)
            if outcome == "abandoned" and self.on_abandoned is not None:
                self.on_abandoned()
            if slot is not None:  # a failed or refused request may have left the slot in any state: none claimed
                known = outcome in ("ok", "cancelled") and not generation.images
                self.slot_chooser.release(slot, generation.prompt_ids + generated if known else None,
                                          generation.cache_salt)

    async def _unless_grammar_refused(self, answer: EventStream, path: str,
                                      request_body: Callable[[str | None], Awaitable[bytes]]) -> EventStream:
        """`answer` to a request sent with a grammar; if it is a 400, the answer to the same request without one
        (`request_body(None)`): the grammar alone was refused when that one is taken (`grammar_support.py`)."""
        if answer.status != 400:
            if answer.status == 200:
                self.grammars.taken()
            return answer
        refusal = error_from_response(answer.status, await answer.read_body(ERROR_BODY_LIMIT))
        answer.close()
        answer = await self._endpoint.post(path, await request_body(None), self._headers, live=self.live)
        if answer.status == 200:
            self.grammars.refused(refusal.message)
        return answer

    def fail_silent(self, since: float, reason: str) -> int:
        """End, with `UpstreamUnavailable(reason)`, every request in flight that has heard nothing from the upstream
        since `since` (loop time): the upstream was found unresponsive then. How many there were. A request
        that heard nothing at all is then sent to another replica (`replicas/engine.py`); one mid-stream ends with the
        upstream's error, as after a broken connection."""
        return sum(connection.fail_if_silent_since(since, UpstreamUnavailable(reason))
                   for connection in list(self.live))

    def _take_slot(self, generation: Generation) -> int | None:
        """The llama-server slot for this generation (`slot_choice.py`); None where the engine chooses."""
        if self.slot_chooser is None:
            return None
        return self.slot_chooser.take(None if generation.images else generation.prompt_ids, generation.cache_salt)

    def _may_reuse(self, generation: Generation, slot: int | None) -> bool:
        """Whether llama-server may reuse the slot's cached prefix (`cache_prompt`): always with shared caches;
        with a salt only in a slot of that salt's, never where llama-server chooses the slot itself."""
        if generation.cache_salt is None:
            return True
        return slot is not None and self.slot_chooser is not None \
            and self.slot_chooser.reuses(slot, generation.cache_salt)

    def _native_body(self, generation: Generation, report_progress: bool, slot: int | None,
                     reuse: bool = True, grammar: str | None = None) -> bytes:
        prompt = (multimodal_prompt(self.tokenizer, generation.prompt_ids, generation.images,
                                    generation.image_positions, self.info.media_marker or "")
                  if generation.images else generation.prompt_ids)
        return orjson.dumps(native_completion_request(prompt, generation.params, report_progress=report_progress,
                                                      slot=slot, reuse_cache=reuse, grammar=grammar))


def _token_run(fields: list[tuple[bytes, bytes]], native: bool) -> TokenRun | None:
    """A read's events as one run of tokens (`wire.token_run`) when there are several and all are
    `data:` fields (a lone event, a slow engine's every read, is cheaper read as it is)."""
    if len(fields) < 2:
        return None
    datas = [data for field, data in fields if field == DATA]
    return token_run(datas, native) if len(datas) == len(fields) else None


def together(tokens: list[GeneratedToken]) -> GeneratedToken:
    """The tokens of one read as one piece of text (`id` the last id, `ids` all of them): the pipeline, the parser
    and the client's stream then take one step for all of them. The engine's own counts say how many there were."""
    if len(tokens) == 1:
        return tokens[0]
    return GeneratedToken(tokens[-1].id, "".join(t.text for t in tokens), [i for t in tokens for i in t.all_ids])
