"""One section of model output (reasoning or answer) without edge whitespace.

Templates strip reasoning and answers when they replay history (GLM's
`content.strip()`, Qwen's `strip('\\n')`), and models put newlines around their
tags (`<think>\\n…\\n</think>\\n\\n`). Streaming such whitespace would show the
client text that the model never sees again, so a section drops leading
whitespace and holds trailing whitespace until more text proves it inner.
"""

from __future__ import annotations


class TrimmedSection:
    def __init__(self) -> None:
        self._started = False
        self._pending = ""

    @property
    def started(self) -> bool:
        """Whether any non-whitespace text has been released."""
        return self._started

    def push(self, text: str) -> str:
        """The part of `text` that can be released now."""
        if not self._started:
            text = text.lstrip()
            if not text:
                return ""
            self._started = True
        body = text.rstrip()
        if not body:
            self._pending += text
            return ""
        released = self._pending + body
        self._pending = text[len(body):]
        return released

    def end(self) -> None:
        """The section is over: trailing whitespace is dropped, a new section may begin."""
        self._started = False
        self._pending = ""
