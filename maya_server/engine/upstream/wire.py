"""What goes over the wire to an upstream engine's completion endpoint, and what comes back.

Pure functions, no I/O: the request body for each kind of upstream, one
streamed SSE `data:` payload → `UpstreamChunk`, an error answer → the
`UpstreamError` the client sees.

The prompt is always token ids (Maya renders and tokenizes; the engine only
generates). Generated token ids come back where the engine can send them:

- llama-server: its own `/completion` endpoint (`NATIVE_PATH`) with
  `return_tokens` sends each sampled id in `tokens`, the leanest event it has:
  no probabilities (`n_probs` made it sort a whole vocabulary's probabilities for
  every token, a third of a tiny model's speed with GLM's 150k tokens), and
  images ride on the same endpoint.
- vLLM: `logprobs: 1` with `return_tokens_as_token_ids` writes tokens as
  `"token_id:N"` in `logprobs.tokens`; a `token_ids` list on the choice
  (newer vLLM's `return_token_ids`) is read as well.
- SGLang and unknown servers: text only (`skip_special_tokens: false` keeps
  reasoning and tool tags in it).
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Literal

import orjson

from ...errors import UpstreamError, UpstreamRejected, UpstreamUnavailable
from ...neutral.events import PromptProgress
from ..base import SamplingParams

UpstreamKind = Literal["llama-server", "vllm", "sglang", "openai"]
ERROR_MESSAGE_LIMIT = 400
"""Characters of an upstream's own error message passed on to the client."""
_CONTEXT_ERROR = re.compile(r"context (length|size|window)|maximum context|longer than the model", re.IGNORECASE)
_TOKEN_ID_PREFIX = "token_id:"
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(slots=True)
class UpstreamChunk:
    text: str = ""
    token_ids: tuple[int, ...] | None = None
    """The generated ids this chunk carries; None when the upstream does not send ids."""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    """The engine's own count (with image tokens), from the final usage."""
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    prompt_progress: PromptProgress | None = None
    """llama-server's `prompt_progress` (asked for with `return_progress`); such a chunk carries no token."""


def multimodal_prompt(tokenizer, prompt_ids: list[int], images: tuple[bytes, ...],
                      positions: tuple[int, ...], marker: str) -> dict[str, Any]:
    """llama-server's multimodal prompt, `{"prompt_string", "multimodal_data"}`: it takes no token ids, so
    the ids between images are decoded back to text (llama-server re-tokenizes them with special-token
    parsing) and each image is the server's media `marker` (`/props`) plus its base64 bytes."""
    pieces, start = [], 0
    for position in positions:
        pieces.append(tokenizer.decode(prompt_ids[start:position]))
        start = position
    pieces.append(tokenizer.decode(prompt_ids[start:]))
    return {"prompt_string": marker.join(pieces),
            "multimodal_data": [base64.b64encode(image).decode("ascii") for image in images]}


def completion_request(
    kind: UpstreamKind, model: str | None, prompt_ids: list[int] | dict, params: SamplingParams,
    stop_ids: Iterable[int], *, report_progress: bool = False, cache_salt: str | None = None,
    grammar: str | None = None,
) -> dict[str, Any]:
    """The streaming `/v1/completions` body for vLLM, SGLang or another OpenAI-style server (`kind`), with
    OpenAI's sampling semantics (llama-server is driven on `NATIVE_PATH`, `native_completion_request`).
    `cache_salt` (the caches isolated per key) goes to the engines whose prefix cache takes one: vLLM's
    `cache_salt` salts the hash of the first prefix block, so another salt's blocks never match; SGLang's
    (0.5.3 and later) joins its radix tree's `extra_key`. An unknown server is not sent a field it may refuse."""
    body: dict[str, Any] = {
        "prompt": prompt_ids,
        "max_tokens": params.max_tokens,
        **_sampling(params),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if model is not None:
        body["model"] = model
    body.update({
        "skip_special_tokens": False,
        "spaces_between_special_tokens": False,
        "stop_token_ids": sorted(stop_ids),
    })
    if kind in ("vllm", "openai"):
        body.update({"logprobs": 1, "return_tokens_as_token_ids": True})
    if cache_salt is not None and kind in SALTED_KINDS:
        body["cache_salt"] = cache_salt
    if grammar is not None:
        body.update(grammar_fields(kind, grammar))
    return body


GRAMMAR_MECHANISMS: dict[str, str] = {
    "llama-server": "grammar",
    "vllm": "structured_outputs.grammar",
    "sglang": "ebnf",
}
"""How each kind of upstream is told the GBNF grammar a generation is held to (`pipeline/constraint.py`):
llama-server's own `grammar`; vLLM's `structured_outputs` (0.10.2 and later; xgrammar reads GBNF); SGLang's
`ebnf` (xgrammar). An unknown OpenAI-style server is told none: what it writes is validated only."""


def grammar_fields(kind: UpstreamKind, grammar: str) -> dict[str, Any]:
    """The body fields that hold a generation to `grammar` on a `kind` upstream (none where it has no way)."""
    if kind == "vllm":
        return {"structured_outputs": {"grammar": grammar}}
    field = GRAMMAR_MECHANISMS.get(kind)
    return {field: grammar} if field is not None else {}


SALTED_KINDS = ("vllm", "sglang")
"""The upstreams whose completion endpoint takes a `cache_salt` for their prefix cache."""


NATIVE_PATH = "/completion"
"""llama-server's own completion endpoint: ids back in `tokens` without probabilities, and images (with a
projector loaded its OpenAI `/v1/completions` takes only a string prompt)."""


def native_completion_request(prompt: list[int] | dict, params: SamplingParams, *,
                              report_progress: bool = False, slot: int | None = None,
                              reuse_cache: bool = True, grammar: str | None = None) -> dict[str, Any]:
    """The streaming `/completion` body for llama-server: OpenAI's sampling, the generated ids in `tokens`, and
    the slot Maya chose (`id_slot`, see `slot_choice.py`; absent: llama-server chooses). Without `reuse_cache`
    (the slot holds another key's sequence) llama-server evaluates the whole prompt (`cache_prompt: false`)."""
    body = {"prompt": prompt, "n_predict": params.max_tokens, **_sampling(params),
            **_llama_server_options(report_progress), "return_tokens": True, "stream": True}
    if not reuse_cache:
        body["cache_prompt"] = False
    if slot is not None:
        body["id_slot"] = slot
    if grammar is not None:
        body["grammar"] = grammar
    return body


def _sampling(params: SamplingParams) -> dict[str, Any]:
    """OpenAI's sampling settings, as both endpoints name them."""
    sampling: dict[str, Any] = {
        "temperature": params.temperature, "top_p": params.top_p,
        "presence_penalty": params.presence_penalty, "frequency_penalty": params.frequency_penalty,
    }
    if params.seed is not None:
        sampling["seed"] = params.seed
    return sampling


def _llama_server_options(report_progress: bool) -> dict[str, Any]:
    """What llama-server is told on either endpoint: it samples with top-k 40 and min-p 0.05 unless told
    otherwise (OpenAI's API has neither), keeps the prompt cached, and sends `prompt_progress` when asked."""
    options: dict[str, Any] = {"top_k": 0, "min_p": 0.0, "cache_prompt": True}
    if report_progress:
        options["return_progress"] = True
    return options


def parse_native_event(data: bytes | str) -> UpstreamChunk | None:
    """One `/completion` SSE payload: `{content, tokens, stop, stop_type, tokens_predicted, tokens_evaluated,
    timings.cache_n, prompt_progress}`; it never says None (no `[DONE]` follows the final one, `stop: true`), so
    the caller stops on `finish_reason`."""
    payload = _event_payload(data)
    tokens = payload.get("tokens")
    final = payload.get("stop") is True
    text = payload.get("content")
    if not final and "prompt_progress" not in payload:  # a token event, nearly every event of a stream
        return UpstreamChunk(text if type(text) is str else "", _id_list(tokens))
    return UpstreamChunk(
        text=text if isinstance(text, str) else "",
        token_ids=_id_list(tokens),
        finish_reason=("length" if payload.get("stop_type") == "limit" else "stop") if final else None,
        prompt_tokens=_int(payload.get("tokens_evaluated")) if final else None,
        completion_tokens=_int(payload.get("tokens_predicted")) if final else None,
        # `tokens_cached` is the slot's whole cache (prompt and generated); the prompt's reuse is `cache_n`
        cached_tokens=_int((payload.get("timings") or {}).get("cache_n")) if final else None,
        prompt_progress=prompt_progress(payload.get("prompt_progress")),
    )


@dataclass(frozen=True, slots=True)
class TokenRun:
    """The generated ids and text of a read's events when every one of them is a plain token event."""

    ids: list[int]
    text: str
    aligned: bool = True
    """Whether each event had both ids and text of its own (llama-server's control tokens come with no text), so
    that the run's text stands for its ids as the events' own texts would."""


def token_run(datas: list[bytes], native: bool) -> TokenRun | None:
    """A read's `data:` payloads (`native`: llama-server's `/completion`, else `/v1/completions`) as one run of
    tokens, when each is a token event with its ids: nearly every read of a busy stream, so they are parsed in
    one go, with no object per event (about half the cost per token of reading them one by one). None when any
    is anything else: an end, usage, progress, an error, text without ids, or not plain JSON (`[DONE]`, an
    escaped lone surrogate); `parse_native_event` / `parse_event` then read them one by one."""
    try:
        payloads = orjson.loads(b"[" + b",".join(datas) + b"]")
    except orjson.JSONDecodeError:
        return None
    ids: list[int] = []
    texts = []
    aligned = True
    for payload in payloads:
        if type(payload) is not dict or "error" in payload or "prompt_progress" in payload:
            return None
        if native:
            if payload.get("stop") is not False:
                return None
            token_ids, text = _id_list(payload.get("tokens")), payload.get("content")
        else:
            choices = payload.get("choices")
            if (payload.get("usage") or "timings" in payload or payload.get("object") == "error"
                    or type(choices) is not list or len(choices) != 1 or type(choices[0]) is not dict
                    or choices[0].get("finish_reason")):
                return None
            token_ids, text = _token_ids(choices[0]), choices[0].get("text")
        if token_ids is None or type(text) is not str:
            return None
        ids += token_ids
        texts.append(text)
        aligned = aligned and bool(text) and bool(token_ids)
    return TokenRun(ids, "".join(texts), aligned)


def parse_event(data: bytes | str) -> UpstreamChunk | None:
    """One SSE `data:` payload; None for the closing `[DONE]`. An error payload raises."""
    if data.strip() in (b"[DONE]", "[DONE]"):
        return None
    return _chunk(_event_payload(data))


def _event_payload(data: bytes | str) -> dict:
    """A stream event's JSON object; an unreadable one, or an error the engine sent, raises."""
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        payload = _with_lone_surrogates(data)
    if not isinstance(payload, dict):
        raise UpstreamError("the upstream engine sent an unexpected stream event")
    if "error" in payload or payload.get("object") == "error":
        raise error_from_payload(_status_of(payload), payload)
    return payload


def _with_lone_surrogates(data: bytes | str) -> object:
    """An event orjson refuses only because a string escapes half a surrogate pair (`"\\ud800"`: valid JSON,
    which an engine that escapes whatever text it holds may write). The standard parser takes it; each
    lone half becomes U+FFFD, as a UTF-8 decoder shows bytes it cannot read. Anything else is unreadable."""
    try:
        return _replace_lone_surrogates(json.loads(data))
    except (ValueError, RecursionError):
        raise UpstreamError("the upstream engine sent an unreadable stream event") from None


def _replace_lone_surrogates(value: object) -> object:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)  # the standard parser joins a valid pair: what is left is lone
    if isinstance(value, dict):
        return {_replace_lone_surrogates(k): _replace_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_lone_surrogates(v) for v in value]
    return value


def parse_error_event(data: bytes | str) -> UpstreamError:
    """An SSE `error:` payload (llama-server writes failures this way) as the error our client gets."""
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        return UpstreamError("the upstream engine reported an unreadable error")
    payload = payload if isinstance(payload, dict) else {}
    wrapped = payload if "error" in payload else {"error": payload}
    return error_from_payload(_status_of(wrapped), wrapped)


def _chunk(payload: dict) -> UpstreamChunk:
    choices = payload.get("choices") or []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
    text = choice.get("text")
    if not usage and "timings" not in payload and "prompt_progress" not in payload:
        # a token event, nearly every event of a stream: only what it can carry is read
        return UpstreamChunk(text if isinstance(text, str) else "", _token_ids(choice),
                             choice.get("finish_reason") or None)
    return UpstreamChunk(
        text=text if isinstance(text, str) else "",
        token_ids=_token_ids(choice),
        finish_reason=choice.get("finish_reason") or None,
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        cached_tokens=_cached_tokens(payload, usage),
        prompt_progress=prompt_progress(payload.get("prompt_progress")),
    )


def prompt_progress(raw: object) -> PromptProgress | None:
    """llama-server's `{total, cache, processed, time_ms}`; None when absent or not four counts."""
    if not isinstance(raw, dict):
        return None
    values = [_int(raw.get(name)) for name in ("total", "cache", "processed", "time_ms")]
    return None if None in values else PromptProgress(*values)


def _id_list(value: object) -> tuple[int, ...] | None:
    """`value` as token ids when it is a list of integers (a JSON `true` is no id)."""
    if type(value) is not list:
        return None
    if len(value) == 1:  # a token event's one id, the common case: no generator to run
        return (value[0],) if type(value[0]) is int else None
    return tuple(value) if all(type(i) is int for i in value) else None


def _token_ids(choice: dict) -> tuple[int, ...] | None:
    ids = _id_list(choice.get("token_ids"))
    if ids is not None:
        return ids
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        return None
    content = logprobs.get("content")
    if isinstance(content, list) and all(isinstance(c, dict) and isinstance(c.get("id"), int) for c in content):
        return tuple(c["id"] for c in content)
    tokens = logprobs.get("tokens")
    if not isinstance(tokens, list):
        return None
    ids = []
    for token in tokens:  # vLLM's `return_tokens_as_token_ids`: "token_id:N", one per token of the chunk
        digits = token[len(_TOKEN_ID_PREFIX):] if isinstance(token, str) and token.startswith(_TOKEN_ID_PREFIX) else ""
        if not digits.isdecimal():
            return None
        ids.append(int(digits))
    return tuple(ids)


def _cached_tokens(payload: dict, usage: dict) -> int | None:
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and _int(details.get("cached_tokens")) is not None:
        return _int(details.get("cached_tokens"))
    timings = payload.get("timings")
    return _int(timings.get("cache_n")) if isinstance(timings, dict) else None  # llama-server's own count


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _status_of(payload: dict) -> int:
    error = payload.get("error") if isinstance(payload.get("error"), dict) else payload
    code = error.get("code")
    return code if isinstance(code, int) and 400 <= code <= 599 else 502


def error_from_response(status: int, body: bytes) -> UpstreamError:
    """An upstream's non-200 answer as the error our client gets."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        payload = {}
    return error_from_payload(status, payload if isinstance(payload, dict) else {})


def error_from_payload(status: int, payload: dict) -> UpstreamError:
    """4xx the client caused (its prompt overflows the upstream's context, a bad value) keep a 4xx;
    an overloaded or loading upstream is retryable; everything else is the upstream's fault (502)."""
    message, kind = _message_and_type(payload)
    if status in (400, 413, 422) and (kind == "exceed_context_size_error" or _CONTEXT_ERROR.search(message)):
        return UpstreamRejected(
            f"The upstream engine's context cannot hold this request: {message}",
            status=400, type="invalid_request_error", code="context_length_exceeded", param="messages",
        )
    if status in (400, 413, 422):
        return UpstreamRejected(
            f"The upstream engine rejected the request: {message or _no_reason(status)}",
            status=400, type="invalid_request_error", code="upstream_rejected",
        )
    if status == 429:
        return UpstreamRejected(
            "The upstream engine is overloaded; retry later", status=429, type="rate_limit_error", code="upstream_overloaded"
        )
    if status == 503:
        return UpstreamUnavailable("The upstream engine is not ready (HTTP 503); retry later")
    if status in (401, 403):
        return UpstreamError(f"The upstream engine refused Maya's credentials (HTTP {status}); check --upstream-key")
    return UpstreamError(f"The upstream engine failed (HTTP {status})")


def _no_reason(status: int) -> str:
    """What to say when the engine gave no message (llama-server answers a body over its size limit with a
    bare 413)."""
    if status == 413:
        return "HTTP 413, the request body is larger than the engine accepts (send fewer or smaller images)"
    return f"HTTP {status}, with no reason given"


def _message_and_type(payload: dict) -> tuple[str, str]:
    error = payload.get("error") if isinstance(payload.get("error"), dict) else payload
    message = error.get("message") or payload.get("detail") or ""
    kind = error.get("type") or ""
    message = message if isinstance(message, str) else str(message)
    return message[:ERROR_MESSAGE_LIMIT], kind if isinstance(kind, str) else ""
