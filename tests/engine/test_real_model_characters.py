"""The real engine writes line-like characters raw inside its JSON; the answer still arrives whole.

llama-server (Maya's child, SmolLM2) is started with a GBNF grammar (`--engine-arg`,
which llama-server applies to every request) that makes the model write exactly
`FORCED`: U+2028, U+2029 and U+0085, which llama-server leaves unescaped and a text
line splitter breaks at, the ASCII separators, emoji whose bytes span tokens, and CJK.
(NUL cannot be spelled in a grammar; tests/engine/upstream/test_characters.py sends it
through a fake engine.)
"""

from __future__ import annotations

import pytest

from tests.embedded import embedded_server

pytestmark = pytest.mark.slow

FORCED = "one\u2028two\u2029three\u0085four\x0bfive\x0csix\x1c\x1eseven 😀🐉 日本語 end"


def grammar_literal(text: str) -> str:
    return '"' + "".join(c if c.isalnum() or c in " 😀🐉日本語" else f"\\u{ord(c):04x}" for c in text) + '"'


@pytest.fixture(scope="module")
def forced(tmp_path_factory):
    grammar = tmp_path_factory.mktemp("grammar") / "forced.gbnf"
    grammar.write_text(f"root ::= {grammar_literal(FORCED)}\n", encoding="utf-8")
    with embedded_server(ctx=1024, slots=1, engine_args=("--grammar-file", str(grammar))) as server:
        yield server


def test_both_apis_streamed_and_not_carry_the_characters_whole(forced):
    client = forced.client()
    messages = [{"role": "user", "content": "Say something."}]
    chat = client.chat.completions.create(model="m", messages=messages, max_tokens=64)
    assert chat.choices[0].message.content == FORCED and chat.choices[0].finish_reason == "stop"
    chunks = list(client.chat.completions.create(model="m", messages=messages, max_tokens=64, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == FORCED
    assert chunks[-1].choices[0].finish_reason == "stop"
    response = client.responses.create(model="m", input="Say something.", max_output_tokens=64)
    assert response.status == "completed" and response.output_text == FORCED
    events = list(client.responses.create(model="m", input="Say something.", max_output_tokens=64, stream=True))
    assert events[-1].type == "response.completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == FORCED
