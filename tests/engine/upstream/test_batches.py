"""Tokens that arrive together are relayed together: one piece down the pipeline for all the tokens of a read,
with the engine's own count of them; while tokens flow and other streams run, reads wait `batch_interval` so
that more gather (a lone stream is read at once).

A vLLM-style upstream on 127.0.0.1 streams SmolLM2 token ids; the engine under test is the real `UpstreamEngine`.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from maya_server.engine.base import GeneratedToken, Generation, SamplingParams
from maya_server.engine.upstream.engine import UpstreamEngine
from maya_server.engine.upstream.probe import UpstreamInfo

from tests.gguf_model_dir import smollm2_tokenizer

TEXT = " The lighthouse keeper climbed the stairs, counting each of the 112 steps."


def events(ids: list[int]) -> list[bytes]:
    token_events = [b"data: " + json.dumps({"choices": [{"index": 0, "text": "", "token_ids": [i]}]}).encode() + b"\n\n"
                    for i in ids]
    last = {"choices": [{"index": 0, "text": "", "finish_reason": "length"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": len(ids)}}
    return token_events + [b"data: " + json.dumps(last).encode() + b"\n\ndata: [DONE]\n\n"]


async def relay(pieces: list[bytes], pause: float, batch_interval: float, tokenizer,
                streams: int = 1, counts: list[list[int]] | None = None) -> list[tuple[list[GeneratedToken], int]]:
    """`streams` generations at once, each answered with `pieces` (one write each, `pause` apart):
    for each, the tokens the engine yielded and its count (and, in `counts`, its count as each piece came)."""
    async def answer(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(pause)
        writer.close()

    async def one(engine) -> tuple[list[GeneratedToken], int]:
        generation = Generation([1, 2, 3], SamplingParams(max_tokens=500))
        tokens, seen = [], []
        async for token in engine.generate(generation):
            if isinstance(token, GeneratedToken):
                tokens.append(token)
                seen.append(generation.stats.generated_tokens)
        if counts is not None:
            counts.append(seen)
        return tokens, generation.stats.generated_tokens

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with server:
        engine = UpstreamEngine(url, tokenizer, UpstreamInfo("vllm", "m", None, 4096), slots=4, context_size=4096)
        engine.batch_interval = batch_interval
        return await asyncio.gather(*(one(engine) for _ in range(streams)))


@pytest.fixture(scope="module")
def tokenizer():
    return smollm2_tokenizer()


def test_a_read_of_many_tokens_is_one_piece_with_the_true_count(tokenizer):
    ids = tokenizer.encode(TEXT, special=False)
    ((tokens, count),) = asyncio.run(relay([b"".join(events(ids))], 0, 0.0, tokenizer))
    assert [t.text for t in tokens] == [TEXT] and count == len(ids)


def test_reads_wait_while_tokens_flow_beside_other_streams_and_lose_nothing(tokenizer):
    ids = tokenizer.encode(TEXT, special=False)
    (at_once, count), = asyncio.run(relay(events(ids), 0.005, 0.0, tokenizer))
    gathered = asyncio.run(relay(events(ids), 0.005, 0.05, tokenizer, streams=2))
    for tokens, gathered_count in gathered:
        assert "".join(t.text for t in tokens) == "".join(t.text for t in at_once) == TEXT
        assert gathered_count == count == len(ids)
        assert len(tokens) < len(at_once) / 2     # a 50 ms wait gathers several 5 ms tokens per read


def test_a_lone_stream_is_read_at_once(tokenizer):
    ids = tokenizer.encode(TEXT, special=False)
    (at_once, _), = asyncio.run(relay(events(ids), 0.005, 0.0, tokenizer))
    (alone, _), = asyncio.run(relay(events(ids), 0.005, 0.05, tokenizer))
    assert len(alone) > len(ids) / 2 and len(at_once) > len(ids) / 2   # no wait: nearly a read per token


def test_a_stream_slower_than_the_wait_is_read_at_once(tokenizer, monkeypatch):
    """Tokens 60 ms apart with a 20 ms wait: waiting would gather nothing, so reads do not wait (a stall of the
    machine may still put two tokens in one read now and then); 5 ms apart, they do."""
    from maya_server.engine.upstream.event_stream import EventStream
    waits: list[float] = []
    real_gather = EventStream.gather

    def counted(self, seconds):
        waits.append(seconds)
        real_gather(self, seconds)

    monkeypatch.setattr(EventStream, "gather", counted)
    ids = tokenizer.encode(TEXT, special=False)[:12]
    asyncio.run(relay(events(ids), 0.06, 0.02, tokenizer, streams=2))
    slow, waits[:] = len(waits), []
    asyncio.run(relay(events(ids), 0.005, 0.02, tokenizer, streams=2))
    assert len(waits) >= 4 and set(waits) == {0.02}
    assert slow < len(waits) / 2, (slow, len(waits))


def test_once_a_read_brings_several_tokens_every_read_waits(tokenizer):
    """Tokens flow when a read brings several: the next read waits, so it brings several too, whether the read
    was taken as one run (`token_run`) or event by event. Per stream, the ids each piece brought: after the first
    piece of several, none of one (bar the last, and one for a stall of the machine)."""
    ids = tokenizer.encode(TEXT * 3, special=False)
    counts: list[list[int]] = []
    asyncio.run(relay(events(ids), 0.005, 0.03, tokenizer, streams=2, counts=counts))
    for seen in counts:
        brought = [after - before for before, after in zip([0] + seen, seen)][:-1]
        first_several = next(i for i, n in enumerate(brought) if n > 1)
        assert brought[first_several:].count(1) <= 1, brought


def test_the_count_holds_when_reads_go_from_one_token_to_several_and_when_cancelled(tokenizer):
    """One token a read needs no counts down the stream (`TokenStream.counts_news`); a read of several switches to
    the engine's own count, which must then stay exact to the end, and a cancelled generation counts the ids taken."""
    ids = tokenizer.encode(TEXT, special=False)
    token_events = events(ids)
    pieces = [*token_events[:3], b"".join(token_events[3:8]), *token_events[8:]]
    ((tokens, count),) = asyncio.run(relay(pieces, 0.02, 0.0, tokenizer))
    assert "".join(t.text for t in tokens) == TEXT and count == len(ids)

    async def cancelled_after(n: int) -> tuple[int, int]:
        async def answer(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
            for event in token_events[:-1]:
                writer.write(event)
                await writer.drain()
                await asyncio.sleep(0.01)
            await asyncio.sleep(30)

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        async with server:
            url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
            engine = UpstreamEngine(url, tokenizer, UpstreamInfo("vllm", "m", None, 4096), slots=4, context_size=4096)
            generation = Generation([1, 2, 3], SamplingParams(max_tokens=500))
            pieces: list[str] = []
            async for token in engine.generate(generation):
                if isinstance(token, GeneratedToken):
                    pieces.append(token.text)
                    if len(pieces) == n:
                        generation.cancel()
            return "".join(pieces), generation.stats.generated_tokens

    text, counted = asyncio.run(cancelled_after(5))
    assert counted >= 5 and tokenizer.decode(ids[:counted]) == text  # the ids taken, however the reads fell
