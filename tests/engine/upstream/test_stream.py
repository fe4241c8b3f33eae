"""Upstream chunks → tokens, and ids → whole characters, with SmolLM2's real vocabulary."""

from __future__ import annotations

import re

import pytest

from maya_server.config import default_model_path
from maya_server.engine.base import Counts, GeneratedToken
from maya_server.engine.detokenizer import MAX_PENDING, IncrementalDetokenizer
from maya_server.engine.upstream.engine import together
from maya_server.engine.upstream.stream import GRACE_EVENTS, UNKNOWN_ID, TokenStream
from maya_server.engine.upstream.wire import TokenRun, UpstreamChunk
from maya_server.errors import UpstreamError
from maya_server.model.hf_tokenizer import HfTokenizer

from tests.gguf_model_dir import write_model_dir

TEXT = "Héllo wörld! 日本語のテキスト 🐉🎉 done.<|im_end|>"
IM_END = 2


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> HfTokenizer:
    return HfTokenizer.from_model_dir(write_model_dir(default_model_path(), tmp_path_factory.mktemp("smollm2")))


def test_pieces_join_to_the_decoded_text_and_never_split_a_character(tokenizer):
    ids = tokenizer.encode(TEXT, special=True)
    detokenizer = IncrementalDetokenizer(tokenizer)
    pieces = [detokenizer.push(i) for i in ids] + [detokenizer.flush()]
    assert "".join(pieces) == tokenizer.decode(ids) == TEXT
    assert all("\ufffd" not in p for p in pieces)
    assert any(p == "" for p in pieces)  # some ids only start a character


def test_a_character_that_never_completes_is_replaced_not_held(tokenizer):
    lone_byte = tokenizer.encode("日", special=False)[0]  # the first of its bytes only
    detokenizer = IncrementalDetokenizer(tokenizer)
    pieces = [detokenizer.push(lone_byte) for _ in range(MAX_PENDING)]
    # each new lead byte proves the one before broken: it is released as U+FFFD at once, the last one at the end
    assert pieces == [""] + ["\ufffd"] * (MAX_PENDING - 1) and detokenizer.flush() == "\ufffd"


def _stream(tokenizer, max_tokens=100):
    return TokenStream(tokenizer, frozenset({IM_END}), max_tokens)


def test_a_stop_id_ends_the_turn_and_is_never_yielded(tokenizer):
    stream = _stream(tokenizer)
    ids = tokenizer.encode("Paris.<|im_end|>", special=True)
    tokens = [t for i in ids for t in stream.feed(UpstreamChunk(token_ids=(i,)))]
    assert "".join(t.text for t in tokens) == "Paris."
    assert IM_END not in [t.id for t in tokens] and stream.generated_tokens == len(ids) - 1
    assert not stream.ended_by_us  # the upstream gets its grace to send its own finish and usage
    stream.feed(UpstreamChunk(finish_reason="stop", completion_tokens=len(ids), cached_tokens=5))
    # the upstream's own count, its turn-ending token included, as its usage says (docs/engines.md)
    assert stream.finish() == "stop" and stream.cached_tokens == 5 and stream.generated_tokens == len(ids)


def test_an_upstream_that_goes_on_after_our_stop_is_cut_off(tokenizer):
    stream = _stream(tokenizer)
    stream.feed(UpstreamChunk(token_ids=(IM_END,)))
    for _ in range(GRACE_EVENTS):
        assert stream.feed(UpstreamChunk(token_ids=(42,))) == []
    assert stream.ended_by_us and stream.finish() == "stop"


def test_max_tokens_holds_even_if_the_upstream_overshoots(tokenizer):
    stream = _stream(tokenizer, max_tokens=3)
    tokens = stream.feed(UpstreamChunk(token_ids=(100, 101, 102, 103, 104)))
    assert [t.id for t in tokens] == [100, 101, 102] and stream.finish() == "length" and stream.generated_tokens == 3


def test_the_upstreams_length_finish_is_kept(tokenizer):
    stream = _stream(tokenizer)
    stream.feed(UpstreamChunk(token_ids=(100,), finish_reason="length"))
    assert stream.finish() == "length"


def test_text_only_chunks_are_cut_at_a_stop_text_and_counted_by_usage(tokenizer):
    stream = _stream(tokenizer)
    first = stream.feed(UpstreamChunk(text="<think>hm</think>Pa"))
    last = stream.feed(UpstreamChunk(text="ris<|im_end|>junk", finish_reason="stop"))
    assert [t.text for t in first + last] == ["<think>hm</think>Pa", "ris"]
    assert all(t.id == UNKNOWN_ID for t in first + last)
    stream.feed(UpstreamChunk(completion_tokens=9))
    assert stream.generated_tokens == 2  # one per chunk while streaming...
    assert stream.finish() == "stop" and stream.generated_tokens == 9  # ...then the upstream's own count


def test_counts_are_news_only_once_the_pieces_no_longer_count_the_ids(tokenizer):
    stream = _stream(tokenizer)
    pieces = 0
    for token_id in (100, 101):
        pieces += len(stream.feed(UpstreamChunk(token_ids=(token_id,))))
        assert stream.counts_news(pieces) is None  # a piece per id: generate's own count is the engine's
    stream.feed(UpstreamChunk(cached_tokens=7))
    assert stream.counts_news(pieces) == Counts(cached_tokens=7)  # a new cached count, nothing else
    assert stream.counts_news(pieces) is None
    assert len(stream.feed(UpstreamChunk(token_ids=(102, 103, 104)))) == 3
    pieces += 1  # relayed `together`: one piece for three ids
    assert stream.counts_news(pieces) == Counts(cached_tokens=7, generated_tokens=5)
    pieces += len(stream.feed(UpstreamChunk(token_ids=(105,))))
    assert stream.counts_news(pieces) == Counts(cached_tokens=7, generated_tokens=6)  # kept current from then on


def test_ids_never_relayed_are_not_counted_and_a_text_streams_count_is_news_at_its_end(tokenizer):
    stream = _stream(tokenizer)
    assert stream.feed(UpstreamChunk(token_ids=(IM_END,))) == []  # a stop id: taken, never yielded
    assert stream.counts_news(0) is None  # a stop id is not counted either
    stream = _stream(tokenizer, max_tokens=1)
    assert len(stream.feed(UpstreamChunk(token_ids=(100, 101)))) == 1
    assert stream.counts_news(1) is None  # max_tokens took one id, and one piece went
    text_only = _stream(tokenizer)
    text_only.feed(UpstreamChunk(text="Pa"))
    text_only.feed(UpstreamChunk(completion_tokens=9, finish_reason="stop"))
    text_only.finish()
    assert text_only.counts_news(1) == Counts(generated_tokens=9)  # the upstream's own count, at the end


def test_a_stream_that_ends_without_a_finish_is_an_upstream_failure(tokenizer):
    stream = _stream(tokenizer)
    stream.feed(UpstreamChunk(token_ids=(100,)))
    with pytest.raises(UpstreamError):
        stream.finish()


def llama_server_chunks(tokenizer, text: str) -> list[UpstreamChunk]:
    """What llama-server streams for `text`: no chunk for a token that ends inside a character; the next
    one carries only its own id, with the whole character's text."""
    ids = tokenizer.encode(text, special=False)
    chunks, sent = [], ""
    for i, token_id in enumerate(ids):
        decoded = tokenizer.decode(ids[:i + 1])
        if decoded.endswith("\ufffd"):
            continue
        chunks.append(UpstreamChunk(text=decoded[len(sent):], token_ids=(token_id,)))
        sent = decoded
    chunks.append(UpstreamChunk(finish_reason="stop", completion_tokens=len(ids)))
    return chunks


@pytest.mark.parametrize("text", ["a\u2028b\u2029c\u0085d", "🐉🎉 日本語 done", "plain words only"])
def test_llama_servers_missing_ids_are_mended_from_its_text(tokenizer, text):
    chunks = llama_server_chunks(tokenizer, text)
    stream = TokenStream(tokenizer, {IM_END}, 100, text_mends_ids=True)
    out = "".join(token.text for chunk in chunks for token in stream.feed(chunk))
    assert stream.finish() == "stop"
    assert out == text
    assert stream.generated_tokens == len(tokenizer.encode(text, special=False))  # the usage's count


def test_without_mending_the_missing_ids_would_corrupt_the_text(tokenizer):
    stream = TokenStream(tokenizer, {IM_END}, 100)
    out = "".join(t.text for chunk in llama_server_chunks(tokenizer, "a\u2028b") for t in stream.feed(chunk))
    assert out != "a\u2028b"  # what the mend is for


def test_llama_servers_native_stream_read_and_mended_whole(tokenizer):
    """The `/completion` endpoint (a vision llama-server's): `content` raw in the JSON, one token id a chunk."""
    import orjson

    from maya_server.engine.upstream.event_stream import SseLines
    from maya_server.engine.upstream.wire import parse_native_event

    text = "a\u2028b\u0085c 🐉"
    frames = b"".join(b"data: " + orjson.dumps({"content": c.text, "tokens": list(c.token_ids or ()),
                                                 "stop": c.finish_reason is not None, "tokens_predicted": c.completion_tokens})
                      + b"\n\n" for c in llama_server_chunks(tokenizer, text))
    assert "\u2028".encode() in frames
    lines = SseLines()
    events = [data for i in range(0, len(frames), 5) for _, data in lines.feed(frames[i:i + 5])]
    stream = TokenStream(tokenizer, {IM_END}, 100, text_mends_ids=True)
    out = "".join(t.text for data in events for t in stream.feed(parse_native_event(data)))
    assert stream.finish() == "stop" and out == text


def _fed_in_runs(stream: TokenStream, chunks: list[UpstreamChunk], size: int) -> str:
    """`chunks` fed as `UpstreamEngine._stream` does a read of `size` events: a run of token events whole where
    `takes_whole` lets it through, else event by event."""
    return "".join(piece.text for piece in _pieces_in_runs(stream, chunks, size))


def _pieces_in_runs(stream: TokenStream, chunks: list[UpstreamChunk], size: int) -> list[GeneratedToken]:
    pieces = []
    for start in range(0, len(chunks), size):
        read = chunks[start:start + size]
        tokens_only = all(c.token_ids is not None and c.finish_reason is None for c in read)
        run = TokenRun([i for c in read for i in (c.token_ids or ())], "".join(c.text for c in read),
                       all(c.text and c.token_ids for c in read))
        if size > 1 and tokens_only and stream.takes_whole(run):
            pieces.append(stream.feed_run(run))
        else:
            pieces += [t for c in read for t in stream.feed(c)]
    return pieces


@pytest.mark.parametrize("size", [1, 3, 50])
def test_pieces_carry_every_id_generated_once_in_order(tokenizer, size):
    """The ids a turn's pieces stand for are the ids generated, each once, whether a read went whole or event by
    event, and when the turn ends inside a character (its held-back text comes with no id of its own): the answer
    comes back as history spelled with them (`pipeline/spellings.py`)."""
    text = "Héllo wörld! 日本語 🐉🎉 and a last dragon 🐉"
    ids = tokenizer.encode(text, special=False)[:-1]  # the turn ends inside the last dragon
    chunks = [UpstreamChunk(text="", token_ids=(i,)) for i in ids] + \
        [UpstreamChunk(finish_reason="length", completion_tokens=len(ids))]
    pieces = _pieces_in_runs(TokenStream(tokenizer, frozenset({IM_END}), 100), chunks, size)
    assert [i for piece in pieces for i in piece.all_ids] == ids
    assert "".join(piece.text for piece in pieces).startswith(text[:-1])
    together_ = together(pieces)
    assert list(together_.all_ids) == ids and together_.id == ids[-1]


def llama_server_chunks_with_control_tokens(tokenizer, text: str) -> list[UpstreamChunk]:
    """`llama_server_chunks` of a text with special tokens in it: each comes with its id and no text (llama-server
    renders control tokens as nothing unless started with `--special`)."""
    chunks = []
    for piece in re.split(r"(<\|im_start\|>|<\|endoftext\|>)", text):
        if piece.startswith("<|"):
            chunks.append(UpstreamChunk(text="", token_ids=tuple(tokenizer.encode(piece, special=True))))
        elif piece:
            chunks += llama_server_chunks(tokenizer, piece)[:-1]
    ids = [i for c in chunks for i in c.token_ids]
    return chunks + [UpstreamChunk(finish_reason="stop", completion_tokens=len(ids))]


@pytest.mark.parametrize("size", [2, 3, 7])
def test_a_control_tokens_tag_is_kept_in_a_run_as_one_by_one(tokenizer, size):
    """llama-server sends a control token with no text; Maya keeps the tag its id decodes to (the family parsers
    need it), in a read of several events as one by one."""
    text = "Think first<|im_start|>then answer 🐉, plainly<|endoftext|> and done"
    chunks = llama_server_chunks_with_control_tokens(tokenizer, text)
    one_by_one = TokenStream(tokenizer, frozenset({IM_END}), 100, text_mends_ids=True)
    in_runs = TokenStream(tokenizer, frozenset({IM_END}), 100, text_mends_ids=True)
    expected = "".join(t.text for c in chunks for t in one_by_one.feed(c))
    assert expected == text
    assert _fed_in_runs(in_runs, chunks, size) == text
    assert (in_runs.finish(), in_runs.generated_tokens) == (one_by_one.finish(), one_by_one.generated_tokens)


@pytest.mark.parametrize("size", [2, 3, 7])
@pytest.mark.parametrize("text, max_tokens, mends", [
    ("plain words only, and then some more of them", 100, True),
    ("a\u2028b\u2029c\u0085d 🐉🎉 日本語 done", 100, True),      # llama-server leaves out ids that end inside a character
    ("Héllo wörld! 日本語のテキスト 🐉🎉 done.", 100, False),    # vLLM: every id, characters split over several
    ("Paris is the capital of France.<|im_end|> and more", 100, False),  # a stop id inside a read
    ("one two three four five six seven eight nine ten", 5, True),     # max_tokens inside a read
])
def test_runs_fed_whole_give_what_events_fed_one_by_one_give(tokenizer, size, text, max_tokens, mends):
    """Text, count, finish: a read of token events taken whole (`takes_whole`, `feed_run`) is the same stream as
    its events fed one at a time, whatever the read's size and whatever in it ends the turn."""
    ids = tokenizer.encode(text, special=True)
    chunks = llama_server_chunks(tokenizer, text) if mends else \
        [UpstreamChunk(text=tokenizer.decode([i]), token_ids=(i,)) for i in ids] + \
        [UpstreamChunk(finish_reason="stop", completion_tokens=len(ids))]
    one_by_one = TokenStream(tokenizer, frozenset({IM_END}), max_tokens, text_mends_ids=mends)
    in_runs = TokenStream(tokenizer, frozenset({IM_END}), max_tokens, text_mends_ids=mends)
    expected = "".join(t.text for c in chunks for t in one_by_one.feed(c))
    assert _fed_in_runs(in_runs, chunks, size) == expected
    assert (in_runs.finish(), in_runs.generated_tokens) == (one_by_one.finish(), one_by_one.generated_tokens)
    if max_tokens == 100 and IM_END not in ids:
        assert expected == text


def test_a_run_after_the_turn_ended_or_without_ids_is_not_taken_whole(tokenizer):
    stream = _stream(tokenizer)
    assert stream.takes_whole(TokenRun([5, 6], "ab")) and not stream.takes_whole(TokenRun([], ""))
    assert not stream.takes_whole(TokenRun([5, IM_END], "a"))
    assert not _stream(tokenizer, max_tokens=2).takes_whole(TokenRun([5, 6, 7], "abc"))
    mending = TokenStream(tokenizer, frozenset({IM_END}), 100, text_mends_ids=True)
    assert not mending.takes_whole(TokenRun([5, 1], "a", aligned=False)) and stream.takes_whole(
        TokenRun([5, 1], "a", aligned=False))
    stream.feed(UpstreamChunk(token_ids=(IM_END,)))
    assert not stream.takes_whole(TokenRun([5, 6], "ab"))
