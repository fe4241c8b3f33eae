"""A fake upstream engine on 127.0.0.1 that streams exactly the bytes a test chooses.

It answers the start-up probe as vLLM, SGLang or llama-server would (`/v1/models`, and
`/props` for llama-server) and every `/v1/completions` (llama-server: its own `/completion`) with one scripted answer: the
text, sent as that engine sends it (llama-server: ids in `logprobs.content`; vLLM:
`token_id:N` strings; SGLang: text only), JSON written raw as the engines write it
(U+2028 and U+0085 unescaped), and the body cut into small writes at awkward places
(inside multi-byte characters, between CR and LF), so the reader sees what a slow
network would hand it.

`FakeUpstream.replaying(kind, directory)` answers instead with a recorded exchange
(`tests/engine/recordings/`): the engine's `/v1/models` card and its `/v1/completions`
stream, byte for byte, one write per event as uvicorn sends them (or cut like any other
answer with `chunk_bytes`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Iterator

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from maya_server.model.tokenizer import Tokenizer

OWNERS = {"vllm": "vllm", "sglang": "sglang", "llama-server": "llamacpp"}


class FakeUpstream:
    def __init__(self, kind: str, tokenizer: Tokenizer | None, *, chunk_bytes: int | None = 7) -> None:
        self.kind = kind
        self.tokenizer = tokenizer
        self.chunk_bytes = chunk_bytes
        """Bytes per write; None: one write per SSE event."""
        self.recorded_models: bytes | None = None
        """A recorded `/v1/models` body, answered instead of the made-up card."""
        self.recorded_stream: bytes | None = None
        """A recorded `/v1/completions` body, answered (whatever the request) instead of `answer`."""
        self.answer = "Hello!"
        self.answer_ids: list[int] | None = None
        """The ids the answer is generated as, where not the tokenizer's own spelling of `answer` (a model may write
        a text with ids that tokenizing it would not give)."""
        self.raw_pieces: list[str] | None = None
        """Text-only engines: the JSON string literals (escapes and all) of each chunk, instead of `answer`."""
        self.requests: list[dict] = []
        self.refused_fields: tuple[str, ...] = ()
        """Body fields answered with a 400, as an engine too old for them (or that cannot read their value) does."""
        app = Starlette(routes=[Route("/v1/models", self._models), Route("/props", self._props),
                                Route("/v1/completions", self._complete, methods=["POST"]),
                                Route("/completion", self._complete_native, methods=["POST"])])
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the fake upstream did not start")
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{self._server.servers[0].sockets[0].getsockname()[1]}"

    @classmethod
    def replaying(cls, kind: str, directory: Path, *, chunk_bytes: int | None = None) -> "FakeUpstream":
        """An upstream that answers with `directory`'s `{kind}.models.json` and `{kind}.v1-completions.sse`."""
        upstream = cls(kind, None, chunk_bytes=chunk_bytes)
        upstream.recorded_models = (directory / f"{kind}.models.json").read_bytes()
        upstream.recorded_stream = (directory / f"{kind}.v1-completions.sse").read_bytes()
        return upstream

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    async def _models(self, _: Request) -> Response:
        if self.recorded_models is not None:
            return Response(self.recorded_models, media_type="application/json")
        return JSONResponse({"data": [{"id": "fake", "owned_by": OWNERS[self.kind], "max_model_len": 4096}]})

    async def _props(self, _: Request) -> Response:
        if self.kind != "llama-server":
            return JSONResponse({"error": "not found"}, status_code=404)
        return JSONResponse({"total_slots": 2, "default_generation_settings": {"n_ctx": 4096}})

    def _refusal(self, body: dict) -> Response | None:
        refused = [name for name in self.refused_fields if name in body]
        if not refused:
            return None
        return JSONResponse({"error": {"code": 400, "type": "invalid_request_error",
                                       "message": f"Failed to parse {refused[0]}"}}, status_code=400)

    async def _complete(self, request: Request) -> Response:
        self.requests.append(await request.json())
        if (refusal := self._refusal(self.requests[-1])) is not None:
            return refusal
        body = self.recorded_stream if self.recorded_stream is not None else b"".join(self._frames())
        return StreamingResponse(self._cut(body), media_type="text/event-stream")

    async def _complete_native(self, request: Request) -> Response:
        """llama-server's own endpoint, as Maya drives it: ids in `tokens`, no chunk at all for a token that ends
        inside a character (the next one brings the whole character and only its own id), no `[DONE]`."""
        self.requests.append(await request.json())
        if (refusal := self._refusal(self.requests[-1])) is not None:
            return refusal
        ids = self._generated_ids()
        frames, sent = [], ""
        for i, token_id in enumerate(ids):
            text = self.tokenizer.decode(ids[:i + 1])
            if text.endswith("\ufffd"):
                continue
            frames.append(b"data: " + orjson.dumps({"content": text[len(sent):], "tokens": [token_id], "stop": False})
                          + b"\n\n")
            sent = text
        frames.append(b"data: " + orjson.dumps({"content": "", "tokens": [], "stop": True, "stop_type": "eos",
                                                "tokens_predicted": len(ids), "tokens_evaluated": 5,
                                                "timings": {"cache_n": 0}}) + b"\n\n")
        return StreamingResponse(self._cut(b"".join(frames)), media_type="text/event-stream")

    def _frames(self) -> Iterator[bytes]:
        if self.raw_pieces is not None:
            for literal in self.raw_pieces:
                yield b'data: {"choices":[{"index":0,"text":' + literal.encode("utf-8", "surrogatepass") + b'}]}\r\n\r\n'
        elif self.kind == "sglang":  # text only, whole characters (an engine holds back a partial one)
            for start in range(0, len(self.answer), 2):
                piece = self.answer[start:start + 2]
                yield b"data: " + orjson.dumps({"choices": [{"index": 0, "text": piece}]}) + b"\n\n"
        else:
            ids = self._generated_ids()
            sent = ""
            for i, token_id in enumerate(ids):
                text = self.tokenizer.decode(ids[:i + 1])
                piece = "" if text.endswith("\ufffd") else text[len(sent):]  # a partial character is held back
                sent += piece
                yield self._frame(token_id, piece)
        yield b"data: " + orjson.dumps({"choices": [{"index": 0, "text": "", "finish_reason": "stop"}],
                                        "usage": {"prompt_tokens": 5, "completion_tokens": 3}}) + b"\n\n"
        yield b"data: [DONE]\n\n"

    def _generated_ids(self) -> list[int]:
        return self.answer_ids if self.answer_ids is not None else self.tokenizer.encode(self.answer, special=False)

    def _frame(self, token_id: int, piece: str) -> bytes:
        """One generated token: its id (where the engine sends ids) and the text it completes."""
        choice: dict = {"index": 0, "text": piece}
        if self.kind == "llama-server":
            choice["logprobs"] = {"content": [{"id": token_id, "token": piece, "logprob": 0.0}]}
        elif self.kind == "vllm":
            choice["logprobs"] = {"tokens": [f"token_id:{token_id}"], "token_logprobs": [0.0]}
        return b"data: " + orjson.dumps({"choices": [choice]}) + b"\n\n"

    async def _cut(self, body: bytes):
        if self.chunk_bytes is None:
            for event in body.split(b"\n\n")[:-1]:
                yield event + b"\n\n"
                await asyncio.sleep(0)
            return
        for start in range(0, len(body), self.chunk_bytes):
            yield body[start:start + self.chunk_bytes]
            await asyncio.sleep(0)
