"""The upstream engine: vLLM, SGLang or llama-server over HTTP, as an `Engine`.

Maya keeps everything but the tokens: it renders and tokenizes the prompt with
the model directory's `tokenizer.json` (`--tokenizer DIR`), sends the ids as
the `prompt` of a streaming `/v1/completions` request, and turns the stream
back into `GeneratedToken`s. Where the upstream sends the generated ids
(llama-server, vLLM) Maya decodes them itself, so reasoning and tool tags
survive whatever the upstream's special-token settings; otherwise the
upstream's text is used and each chunk counts as one token until the final
usage gives the real count. Turn-ending ids are never yielded: the upstream is
asked to stop on them (vLLM, SGLang) and Maya stops on them too (llama-server
stops on its model's end-of-generation tokens by itself).

A llama-server started with a multimodal projector (`/props` modalities) takes
images: its OpenAI endpoint then accepts only string prompts, so such a server is
driven on its own `/completion` (token ids, or `multimodal_prompt` when the
request has images; see `upstream_wire`). Every other engine refuses images
before generation with `images_refusal`.

Concurrency is the upstream's: `slots` sequences at once (its own
`total_slots`, else `--upstream-slots`, else 8). Leaving the stream (a client
gone, `generation.cancel()`) closes the HTTP request, which makes the upstream
drop the sequence. Every lower-layer failure is mapped to an `UpstreamError`
in `translate_transport_errors`; the key only ever travels in the
Authorization header.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import AsyncIterator, Iterator

import httpx
import orjson

from ..errors import ConfigError, EngineError, LineTooLong, UpstreamError, UpstreamRejected, UpstreamUnavailable
from ..family import family_from_template, template_from_model_dir
from ..hf_tokenizer import HfTokenizer
from ..tokenizer import Tokenizer
from .base import DEFAULT_CTX, Counts, Engine, Finish, Generation, StreamItem
from .upstream_health import UpstreamCollector, UpstreamHealth, public_url
from .upstream_probe import UpstreamInfo, measure_image_tokens, probe_upstream
from .sse_reader import SseEvent, SseReader
from .upstream_stream import TokenStream
from .upstream_wire import (
    NATIVE_PATH, completion_request, error_from_response, multimodal_prompt, native_completion_request,
    parse_error_event, parse_event, parse_native_event,
)

log = logging.getLogger("maya.engine")

DEFAULT_SLOTS = 8
"""Sequences sent at once when the upstream reports no capacity (vLLM and SGLang batch far more)."""
ERROR_BODY_LIMIT = 65536
EVENT_LINE_LIMIT = 4 * 1024 * 1024
"""One streamed event may not exceed this: a runaway upstream cannot fill our memory line by line."""


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
    connect_timeout: float = 5.0
    read_timeout: float = 600.0


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
        connect_timeout: float = 5.0,
        read_timeout: float = 600.0,
        uds: str | None = None,
    ) -> None:
        """`uds`: reach `url` over this Unix socket (the embedded engine's private llama-server)."""
        self.url = url.rstrip("/")
        self.tokenizer = tokenizer
        self.info = info
        self.slots = slots
        self.context_size = context_size
        self.health = UpstreamHealth(self.url)
        self._timeout = httpx.Timeout(connect=connect_timeout, read=read_timeout, write=read_timeout, pool=connect_timeout)
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._uds = uds
        self._client: httpx.AsyncClient | None = None
        self.accepts_images = info.kind == "llama-server" and info.vision
        self.images_refusal = (
            "the upstream llama-server was started without a multimodal projector; start it with --mmproj FILE"
            if info.kind == "llama-server" else
            f"Maya sends {info.kind} token-id prompts through its completion endpoint, which carries no images; "
            "use llama-server with --mmproj (embedded: Maya's --mmproj FILE)")

    @classmethod
    def connect(cls, options: UpstreamOptions) -> "UpstreamEngine":
        """Load the tokenizer and meet the upstream; any failure is a one-line `ConfigError` naming the setting
        (`tokenizer`, `upstream_url`) whose value failed."""
        try:
            tokenizer = HfTokenizer.from_model_dir(options.tokenizer_dir)
        except Exception as exc:  # tokenizers raises its own exception types for a malformed file
            where = Path(options.tokenizer_dir) / "tokenizer.json"
            raise ConfigError("tokenizer", f"cannot load {where}: {exc}") from None
        timeout = httpx.Timeout(options.connect_timeout, read=options.read_timeout)
        headers = {"Authorization": f"Bearer {options.key}"} if options.key else {}
        with httpx.Client(base_url=options.url, timeout=timeout, headers=headers) as client:
            try:
                info = probe_upstream(client)
            except UpstreamError as exc:
                raise ConfigError(
                    "upstream_url", f"{exc.message} at {public_url(options.url)}; is it running and ready?"
                ) from None
            if options.model is not None:
                info = replace(info, model=options.model)
            image_tokens = 0
            if info.vision and info.kind == "llama-server":
                try:
                    image_tokens = measure_image_tokens(client, info.media_marker)
                except UpstreamError as exc:
                    raise ConfigError("upstream_url", f"the upstream's image probe failed: {exc.message}") from None
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
        engine.template_family = family_from_template(template_from_model_dir(options.tokenizer_dir) or info.chat_template)
        log.info("upstream %s (%s) at %s: %d slots, context %d",
                 info.model, info.kind, engine.health.url, engine.slots, engine.context_size)
        return engine

    @property
    def reports_prompt_progress(self) -> bool:
        """llama-server sends `prompt_progress` when asked; vLLM and SGLang have no such report."""
        return self.info.kind == "llama-server"

    def describe(self) -> dict:
        upstream = {"kind": self.info.kind, "model": self.info.model, **self.health.describe()}
        return {**super().describe(), "upstream": upstream}

    def metric_collectors(self) -> list:
        return [UpstreamCollector(self.health, self.slots)]

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:  # created in the serving event loop, on first use
            limits = httpx.Limits(max_connections=self.slots * 2, max_keepalive_connections=self.slots)
            transport = httpx.AsyncHTTPTransport(uds=self._uds, limits=limits) if self._uds else None
            self._client = httpx.AsyncClient(base_url=self.url, timeout=self._timeout, headers=self._headers, limits=limits,
                                             transport=transport)
        return self._client

    async def _stream(self, generation: Generation) -> AsyncIterator[StreamItem]:
        yield Counts(prompt_tokens=len(generation.prompt_ids) + len(generation.images) * self.image_tokens)
        if not generation.prompt_ids:
            raise EngineError("the prompt is empty")
        if generation.images and not self.accepts_images:
            raise EngineError(f"images reached an engine that cannot take them: {self.images_refusal}")
        stop_ids = generation.params.stop_token_ids
        stream = TokenStream(self.tokenizer, stop_ids, generation.params.max_tokens,
                             text_mends_ids=self.info.kind == "llama-server")
        prompt = (multimodal_prompt(self.tokenizer, generation.prompt_ids, generation.images,
                                    generation.image_positions, self.info.media_marker or "")
                  if generation.images else generation.prompt_ids)
        report_progress = generation.report_progress and self.reports_prompt_progress
        native = self.accepts_images  # llama-server's own endpoint: no `[DONE]`, its final chunk ends the stream
        if native:
            path, parse = NATIVE_PATH, parse_native_event
            body = orjson.dumps(native_completion_request(prompt, generation.params, report_progress=report_progress))
        else:
            path, parse = "/v1/completions", parse_event
            body = orjson.dumps(completion_request(self.info.kind, self.info.model, prompt, generation.params,
                                                   stop_ids, report_progress=report_progress))
        outcome, failure = "cancelled", None
        try:
            with translate_transport_errors(self._timeout):
                async with self._http().stream(
                    "POST", path, content=body, headers={"Content-Type": "application/json"}
                ) as response:
                    if response.status_code != 200:
                        raise error_from_response(response.status_code, await _read_bounded(response))
                    async for data in _events(response):
                        chunk = parse(data)
                        if chunk is None:
                            break
                        if chunk.prompt_tokens is not None and generation.images:
                            yield Counts(prompt_tokens=chunk.prompt_tokens)  # the engine's count of the image tokens
                        if chunk.prompt_progress is not None:
                            yield chunk.prompt_progress
                            continue
                        tokens = stream.feed(chunk)
                        yield stream.counts()
                        for token in tokens:
                            yield token
                        if stream.ended_by_us or generation.cancelled or (native and chunk.finish_reason is not None):
                            break
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
            self.health.record(outcome, failure)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()


@contextmanager
def translate_transport_errors(timeout: httpx.Timeout) -> Iterator[None]:
    """Every httpx failure becomes an `UpstreamError` here, and nowhere else."""
    try:
        yield
    except httpx.ConnectTimeout:
        raise UpstreamUnavailable(f"cannot connect to the upstream engine within {timeout.connect}s") from None
    except httpx.ConnectError:
        raise UpstreamUnavailable("cannot connect to the upstream engine") from None
    except httpx.PoolTimeout:
        raise UpstreamUnavailable("no connection to the upstream engine became free in time") from None
    except httpx.TimeoutException:
        raise UpstreamUnavailable(f"the upstream engine sent nothing for {timeout.read}s") from None
    except (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL, httpx.CookieConflict) as exc:
        raise UpstreamError(f"the upstream engine broke off the generation ({type(exc).__name__})") from None


async def _events(response: httpx.Response) -> AsyncIterator[str]:
    """The `data:` payloads of an SSE stream, split only at the line ends SSE has (`sse_reader`): a model's
    U+2028 or U+0085, written raw inside an engine's JSON, never cuts an event."""
    reader = SseReader(EVENT_LINE_LIMIT)
    try:
        async for chunk in response.aiter_bytes():
            for event in reader.feed(chunk):
                yield _payload(event)
        for event in reader.close():
            yield _payload(event)
    except LineTooLong:
        raise UpstreamError("the upstream engine sent an oversized stream event") from None


def _payload(event: SseEvent) -> str:
    if event.error is not None:
        raise parse_error_event(event.error)
    return event.data


async def _read_bounded(response: httpx.Response) -> bytes:
    body = bytearray()
    async for part in response.aiter_bytes():
        body += part
        if len(body) >= ERROR_BODY_LIMIT:
            break
    return bytes(body[:ERROR_BODY_LIMIT])
