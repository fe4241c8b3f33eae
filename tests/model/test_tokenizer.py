"""The tokenizer boundary (`Prompt`, `Segment`, `PromptBuilder`) over a recording fake tokenizer.

Pins: control segments are encoded with special-token parsing and plain ones without, so a user who
types `<|im_end|>` never closes a turn; adjacent plain segments are merged into one run (as the model
sees them) while control segments and images split runs; a media segment has no ids, only its position;
and `plain_text_spells_control` spots plain text that would turn into a control token if sent as text.
"""

from __future__ import annotations

from maya_server.model.tokenizer import Prompt, PromptBuilder, Segment

SPECIAL = {"<|im_start|>": 1, "<|im_end|>": 2}


class FakeTokenizer:
    """One id per character (its code point); with `special`, whole special tokens become ids 1 and 2."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []

    def encode(self, text: str, *, special: bool) -> list[int]:
        self.calls.append((text, special))
        ids, i = [], 0
        while i < len(text):
            token = next((t for t in SPECIAL if special and text.startswith(t, i)), None)
            ids.append(SPECIAL[token] if token else ord(text[i]))
            i += len(token) if token else 1
        return ids

    def decode(self, ids) -> str:
        return "".join(chr(i) for i in ids)


def chat(user_text: str) -> Prompt:
    return (PromptBuilder().control("<|im_start|>").plain("user\n").plain(user_text).control("<|im_end|>")
            .build())


def test_the_builder_writes_segments_in_order_with_their_kind():
    builder = PromptBuilder()
    assert builder.control("<|im_start|>") is builder and builder.plain("hi") is builder
    prompt = builder.media("<image>").build()
    assert prompt.segments == (Segment("<|im_start|>", True), Segment("hi"), Segment("<image>", media=True))
    assert prompt.text == "<|im_start|>hi<image>"


def test_control_is_parsed_as_special_and_user_text_never_is():
    tokenizer = FakeTokenizer()
    ids = chat("<|im_end|>é").token_ids(tokenizer)
    assert ids[0] == 1 and ids[-1] == 2
    assert ids[1:-1] == [ord(c) for c in "user\n<|im_end|>é"]  # the typed tag stays characters
    assert tokenizer.calls == [("<|im_start|>", True), ("user\n<|im_end|>é", False), ("<|im_end|>", True)]


def test_adjacent_plain_segments_merge_but_control_segments_do_not():
    tokenizer = FakeTokenizer()
    prompt = PromptBuilder().plain("a").plain("").plain("b").control("<|im_end|>").control("<|im_start|>").build()
    prompt.token_ids(tokenizer)
    assert tokenizer.calls == [("ab", False), ("<|im_end|>", True), ("<|im_start|>", True)]


def test_media_has_no_ids_only_its_position_and_splits_plain_runs():
    tokenizer = FakeTokenizer()
    prompt = PromptBuilder().control("<|im_start|>").plain("see ").media("<image>").plain("and ").media("<image>") \
        .build()
    ids, media = prompt.tokenize(tokenizer)
    assert ids == [1] + [ord(c) for c in "see and "]
    assert media == (5, 9)
    assert ("see ", False) in tokenizer.calls and all("<image>" not in text for text, _ in tokenizer.calls)
    assert prompt.token_ids(FakeTokenizer()) == ids


def test_no_media_means_no_positions():
    assert chat("hi").tokenize(FakeTokenizer())[1] == ()


def test_plain_text_that_spells_a_control_token_is_detected():
    assert chat("please <|im_end|> here").plain_text_spells_control(FakeTokenizer())
    assert not chat("<|im_end without the bar").plain_text_spells_control(FakeTokenizer())
    # a spelling split across two plain segments is one run, so it is found too
    split = PromptBuilder().plain("<|im_").plain("end|>").build()
    assert split.plain_text_spells_control(FakeTokenizer())
