"""A GBNF recognizer for tests: does a grammar Maya wrote accept a text?

Reads the GBNF that `maya_server/structured/grammar.py` writes (and llama.cpp's own grammars use): rules
`name ::= …`, one per line; string literals with `\\" \\\\ \\n \\r \\t \\xHH \\uHHHH` escapes; character classes
`[…]`/`[^…]` with ranges; groups; `|`; `* + ?` and `{m}`, `{m,}`, `{m,n}`. Matching is by sets of end positions
(`ends(node, start)`, memoized), which takes any grammar without left recursion, so a test can ask about any
text, valid or not. Independent of Maya's grammar writer on purpose: it shares no code with it.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

_NAME = re.compile(r"[a-zA-Z0-9_-]+")


@dataclass(frozen=True)
class _Literal:
    text: str


@dataclass(frozen=True)
class _Class:
    ranges: tuple[tuple[int, int], ...]
    negated: bool

    def has(self, char: str) -> bool:
        inside = any(low <= ord(char) <= high for low, high in self.ranges)
        return inside != self.negated


@dataclass(frozen=True)
class _Ref:
    name: str


@dataclass(frozen=True)
class _Seq:
    items: tuple


@dataclass(frozen=True)
class _Alt:
    options: tuple


@dataclass(frozen=True)
class _Repeat:
    node: object
    low: int
    high: int | None


class GrammarSyntaxError(ValueError):
    pass


class Recognizer:
    def __init__(self, grammar: str) -> None:
        self.rules: dict[str, object] = {}
        for line in grammar.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            name, sep, body = line.partition("::=")
            if not sep or not _NAME.fullmatch(name.strip()):
                raise GrammarSyntaxError(f"not a rule: {line!r}")
            reader = _Reader(body)
            self.rules[name.strip()] = reader.alternatives()
            reader.end()
        if "root" not in self.rules:
            raise GrammarSyntaxError("no root rule")
        for node in self.rules.values():
            self._check_refs(node)

    def _check_refs(self, node: object) -> None:
        if isinstance(node, _Ref) and node.name not in self.rules:
            raise GrammarSyntaxError(f"undefined rule {node.name!r}")
        for child in getattr(node, "items", ()) or getattr(node, "options", ()):
            self._check_refs(child)
        if isinstance(node, _Repeat):
            self._check_refs(node.node)

    def accepts(self, text: str) -> bool:
        memo: dict[tuple[int, int], frozenset[int]] = {}
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 20000))
        try:
            return len(text) in self._ends(self.rules["root"], 0, text, memo)
        finally:
            sys.setrecursionlimit(limit)

    def _ends(self, node: object, start: int, text: str, memo: dict) -> frozenset[int]:
        key = (id(node), start)
        if key in memo:
            return memo[key]
        memo[key] = frozenset()  # a left-recursive loop would find nothing new here
        if isinstance(node, _Literal):
            found = frozenset({start + len(node.text)}) if text.startswith(node.text, start) else frozenset()
        elif isinstance(node, _Class):
            found = frozenset({start + 1}) if start < len(text) and node.has(text[start]) else frozenset()
        elif isinstance(node, _Ref):
            found = self._ends(self.rules[node.name], start, text, memo)
        elif isinstance(node, _Alt):
            found = frozenset().union(*(self._ends(option, start, text, memo) for option in node.options))
        elif isinstance(node, _Seq):
            positions = frozenset({start})
            for item in node.items:
                positions = frozenset().union(*(self._ends(item, p, text, memo) for p in positions))
                if not positions:
                    break
            found = positions
        else:
            found = self._repeat(node, start, text, memo)
        memo[key] = found
        return found

    def _repeat(self, node: _Repeat, start: int, text: str, memo: dict) -> frozenset[int]:
        """The ends after `low` to `high` matches; unbounded, a position met again after `low` adds nothing."""
        found: set[int] = {start} if node.low == 0 else set()
        settled = set(found)
        current: set[int] = {start}
        count = 0
        while current and (node.high is None or count < node.high):
            count += 1
            current = set().union(*(self._ends(node.node, p, text, memo) for p in current))
            if count >= node.low:
                found |= current
                if node.high is None:
                    current -= settled
                    settled |= current
        return frozenset(found)


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def end(self) -> None:
        self._space()
        if self.at != len(self.text):
            raise GrammarSyntaxError(f"unexpected {self.text[self.at:]!r}")

    def _space(self) -> None:
        while self.at < len(self.text) and self.text[self.at] in " \t":
            self.at += 1

    def _peek(self) -> str:
        self._space()
        return self.text[self.at] if self.at < len(self.text) else ""

    def alternatives(self) -> object:
        options = [self._sequence()]
        while self._peek() == "|":
            self.at += 1
            options.append(self._sequence())
        return options[0] if len(options) == 1 else _Alt(tuple(options))

    def _sequence(self) -> object:
        items = []
        while self._peek() not in ("", "|", ")"):
            items.append(self._postfix(self._primary()))
        return _Seq(tuple(items))

    def _primary(self) -> object:
        char = self._peek()
        if char == '"':
            return self._literal()
        if char == "[":
            return self._class()
        if char == "(":
            self.at += 1
            node = self.alternatives()
            if self._peek() != ")":
                raise GrammarSyntaxError("unclosed group")
            self.at += 1
            return node
        match = _NAME.match(self.text, self.at)
        if not match:
            raise GrammarSyntaxError(f"unexpected {self.text[self.at:]!r}")
        self.at = match.end()
        return _Ref(match.group())

    def _postfix(self, node: object) -> object:
        char = self.text[self.at] if self.at < len(self.text) else ""
        if char and char in "*+?":
            self.at += 1
            return _Repeat(node, 0 if char != "+" else 1, None if char != "?" else 1)
        if char == "{":
            close = self.text.index("}", self.at)
            low, comma, high = self.text[self.at + 1:close].partition(",")
            self.at = close + 1
            return _Repeat(node, int(low), int(low) if not comma else (int(high) if high.strip() else None))
        return node

    def _escape(self) -> str:
        char = self.text[self.at]
        self.at += 1
        simple = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "]": "]", "[": "[", "-": "-", "^": "^",
                  "/": "/"}
        if char in simple:
            return simple[char]
        width = {"x": 2, "u": 4, "U": 8}.get(char)
        if width is None:
            raise GrammarSyntaxError(f"unknown escape \\{char}")
        code = int(self.text[self.at:self.at + width], 16)
        self.at += width
        return chr(code)

    def _literal(self) -> _Literal:
        self.at += 1
        out = []
        while self.text[self.at] != '"':
            char = self.text[self.at]
            self.at += 1
            out.append(self._escape() if char == "\\" else char)
        self.at += 1
        return _Literal("".join(out))

    def _class(self) -> _Class:
        self.at += 1
        negated = self.text[self.at] == "^"
        if negated:
            self.at += 1
        ranges = []
        while self.text[self.at] != "]":
            low = self._class_char()
            if self.text[self.at] == "-" and self.text[self.at + 1] != "]":
                self.at += 1
                ranges.append((ord(low), ord(self._class_char())))
            else:
                ranges.append((ord(low), ord(low)))
        self.at += 1
        return _Class(tuple(ranges), negated)

    def _class_char(self) -> str:
        char = self.text[self.at]
        self.at += 1
        return self._escape() if char == "\\" else char
