"""Refusing a prompt whose length alone rules the context out, before it is tokenized.

Why: tokenizing is the one step of preparing a prompt whose cost grows with the
prompt and that another process may do (the embedded engine asks llama-server's
`/tokenize`, ~1 s of the child's CPU a megabyte here). A 24 MB prompt cannot fit
a 4,096-token context however it tokenizes, yet it used to cost half a minute of
the child's time before its 400.

The bound: a token stands for at most `max_token_bytes` bytes of text (the
vocabulary's longest piece, 81 bytes for SmolLM2, a run of spaces), for a
tokenizer that keeps text as it is (`GgufVocabulary.max_token_bytes`), so a text
of `n` characters (each at least one byte, and a character split between two
tokens counted in both) takes at least `ceil(n / max_token_bytes)` tokens.
Counted over the rendered prompt, so the family's template is in it; images add
the engine's `image_tokens` each, as the exact check after tokenizing counts them.
It is a lower bound, never an estimate: a prompt refused here would be refused
after tokenizing too, with the same 400; a prompt under it is tokenized and
checked exactly. An engine that does not know its longest token (None) is not
bounded here.
"""

from __future__ import annotations

from ..errors import ContextLengthExceeded
from ..model.tokenizer import Prompt


def least_tokens(prompt: Prompt, max_token_bytes: int, image_tokens: int) -> int:
    """The fewest tokens `prompt` can take: its text's characters over the longest token, its images' tokens."""
    characters = sum(len(seg.text) for seg in prompt.segments if not seg.media)
    images = sum(1 for seg in prompt.segments if seg.media)
    return -(-characters // max_token_bytes) + images * image_tokens


def refuse_beyond_context(prompt: Prompt, *, max_token_bytes: int | None, image_tokens: int, context: int,
                          max_tokens: int | None, param: str) -> None:
    """Raise the 400 `context_length_exceeded` when `prompt` cannot fit `context` (with `max_tokens` to generate,
    when asked) whatever its tokens; nothing when it might, or when `max_token_bytes` is unknown."""
    if not max_token_bytes:
        return
    least = least_tokens(prompt, max_token_bytes, image_tokens)
    if least < context and (max_tokens is None or least + max_tokens <= context):
        return
    asked = f" and {max_tokens} in the completion" if max_tokens is not None else ""
    raise ContextLengthExceeded(
        f"This model's maximum context length is {context} tokens. However, the messages take at least {least} "
        f"tokens{asked} (they are too long for any tokenization to fit: one token covers at most "
        f"{max_token_bytes} bytes). Please reduce the length of the messages.",
        param=param,
    )
