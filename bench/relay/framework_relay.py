"""The bare relay's work on Maya's framework: what uvicorn, Starlette and one streaming task cost per token.

`bare_relay.py` is the floor of any Python relay: callbacks on the event loop,
no framework. Maya runs on uvicorn (httptools, uvloop) and Starlette, and each
streamed answer is a task whose async generators are resumed once an event.
This relay does the bare relay's per-token work (one JSON parse per upstream
event, one Chat-like chunk dumped per token, one write per read) inside that
machinery: a Starlette `StreamingResponse` over an async generator that reads
the upstream with Maya's own lean reader (`engine/upstream/event_stream.py`). No
tokenizer, template, parser, assembler or middleware. So between the three
relays of `floor_bench.py`:

- framework ÷ bare: what the server framework and the task cost,
  before any of Maya's own steps;
- Maya ÷ framework: what Maya's pipeline costs on top.

    python bench/relay/framework_relay.py --upstream-port N --port M   # serves until killed; GET /health answers
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for path in (str(HERE), str(HERE.parents[1])):
    if path not in sys.path:
        sys.path.insert(0, path)

import orjson  # noqa: E402
import uvicorn  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import PlainTextResponse, StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from bare_relay import upstream_request  # noqa: E402
from maya_server.engine.upstream.event_stream import DATA, Endpoint  # noqa: E402


def create_app(upstream_port: int, max_tokens: int, gather_ms: float = 0) -> Starlette:
    body = upstream_request(max_tokens).partition(b"\r\n\r\n")[2]
    endpoint = Endpoint(f"http://127.0.0.1:{upstream_port}")

    async def tokens():
        answer = await endpoint.post("/completion", body, {})
        count = 0
        try:
            async for fields in answer.batches():
                out = []
                for field, data in fields:
                    if field != DATA:
                        continue
                    event = orjson.loads(data)
                    if event.get("stop"):  # the final event: no token, the usage
                        usage = orjson.dumps({"usage": {"completion_tokens": count}})
                        yield b"".join(out) + b"data: " + usage + b"\n\ndata: [DONE]\n\n"
                        return
                    count += 1
                    delta = {"choices": [{"index": 0, "delta": {"content": event["content"]}}]}
                    out.append(b"data: " + orjson.dumps(delta) + b"\n\n")
                if out:
                    yield b"".join(out)
                if gather_ms:  # as Maya's --relay-batch-ms: let the next tokens pile up, then take them at once
                    answer.gather(gather_ms / 1000)
        finally:
            answer.close()

    async def chat(request: Request) -> StreamingResponse:
        await request.body()
        return StreamingResponse(tokens(), media_type="text/event-stream")

    async def health(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/health", health)])


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--upstream-port", type=int, required=True)
    args.add_argument("--port", type=int, required=True)
    args.add_argument("--tokens", type=int, default=256, help="n_predict of each completion")
    args.add_argument("--gather-ms", type=float, default=0, help="hold each stream this long after a read "
                      "(Maya's --relay-batch-ms; Maya holds only while tokens flow beside other streams)")
    opts = args.parse_args()
    uvicorn.run(create_app(opts.upstream_port, opts.tokens, opts.gather_ms), host="127.0.0.1", port=opts.port,
                loop="uvloop", http="httptools", log_level="warning")


if __name__ == "__main__":
    main()
