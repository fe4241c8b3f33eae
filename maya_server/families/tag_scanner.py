"""Finding tags in model output that arrives in arbitrary pieces.

Engines hand us text split wherever a token boundary (or a network chunk) fell,
so a tag such as `</think>` can arrive as `</th` + `ink>`. The scanner keeps
only the shortest tail that could still grow into a tag and releases
everything before it at once, which keeps streaming latency at one partial tag.
"""

from __future__ import annotations

import functools
from typing import Iterable


class TagScanner:
    """A buffer that yields text and tags in order.

    Example::

        scanner = TagScanner()
        scanner.push("Hello </th")
        scanner.next(("</think>",))   # ("Hello ", None): "</th" is held back
        scanner.push("ink>rest")
        scanner.next(("</think>",))   # ("", "</think>")
    """

    def __init__(self) -> None:
        self._buffer = ""

    def push(self, text: str) -> None:
        self._buffer += text

    def next(self, tags: Iterable[str]) -> tuple[str, str | None]:
        """The text before the earliest complete tag and that tag, both consumed.

        Without a complete tag, returns the text that cannot be the start of one
        and None; a possible partial tag stays buffered. At equal positions the
        longer tag wins.
        """
        tags = tuple(tags)
        _, firsts = _tag_shape(tags)
        if not any(first in self._buffer for first in firsts):  # most tokens: no tag can even begin here
            text, self._buffer = self._buffer, ""
            return text, None
        found = self._earliest(tags)
        if found is not None:
            pos, tag = found
            text = self._buffer[:pos]
            self._buffer = self._buffer[pos + len(tag):]
            return text, tag
        keep = _partial_tag_length(self._buffer, tags)
        cut = len(self._buffer) - keep
        text, self._buffer = self._buffer[:cut], self._buffer[cut:]
        return text, None

    def drain(self) -> str:
        """Everything still buffered (a partial tag that never completed)."""
        text, self._buffer = self._buffer, ""
        return text

    def _earliest(self, tags: tuple[str, ...]) -> tuple[int, str] | None:
        best: tuple[int, int, str] | None = None
        for tag in tags:
            pos = self._buffer.find(tag)
            if pos >= 0 and (best is None or (pos, -len(tag)) < best[:2]):
                best = (pos, -len(tag), tag)
        return None if best is None else (best[0], best[2])


def _partial_tag_length(buffer: str, tags: tuple[str, ...]) -> int:
    """Length of the longest buffer suffix that is a proper prefix of a tag. Only a suffix that begins with some
    tag's first character can be one, so those characters are looked up (str.find, in C) rather than every
    suffix tried: this runs for every token the model writes."""
    longest, firsts = _tag_shape(tags)
    start = max(0, len(buffer) - longest + 1)
    best = 0
    for first in firsts:
        position = buffer.find(first, start)
        while position >= 0:
            tail = buffer[position:]
            if any(tag.startswith(tail) for tag in tags):
                best = max(best, len(tail))
                break  # the earliest match is this character's longest suffix
            position = buffer.find(first, position + 1)
    return best


@functools.lru_cache(maxsize=64)
def _tag_shape(tags: tuple[str, ...]) -> tuple[int, frozenset[str]]:
    """The longest tag's length and the tags' first characters (a family has a few fixed tag sets)."""
    return max((len(t) for t in tags), default=0), frozenset(t[0] for t in tags if t)
