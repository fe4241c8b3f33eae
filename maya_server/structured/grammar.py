"""JSON Schema (Maya's subset) → a GBNF grammar, the text every engine Maya drives can hold a model to.

llama-server takes GBNF as `grammar`; vLLM (`structured_outputs.grammar`) and SGLang (`ebnf`) take it through
xgrammar, whose EBNF reads GBNF. So Maya writes one grammar, for the whole of what the model writes after the
prompt: a reasoning section first where the family has one (`ReasoningLead`), then the answer, a JSON value held
to the schema or the family's tool calls (`constraint.py`). The grammar only narrows what the model may write;
the publish gate still validates the result, so anything the grammar does not say (or an engine that ignores it)
can never publish invalid output.

What the grammar holds the model to, per keyword of the subset (`schema_check.py`):

- `type` (one or a list), `enum`, `const`, `anyOf`: exactly, as alternatives;
- `properties`/`required`: the declared properties, required ones always and in order, optional ones after them
  in order; an object schema without `properties` is any object (its values held to `additionalProperties` when
  that is a schema);
- `items`, `minItems`/`maxItems`; `minLength`/`maxLength` (in characters, an escape counting as one): bounded
  repetitions up to `MAX_BOUNDED_REPEAT`, beyond it left to validation;
- numbers: a minimum of 0 or more rules the minus sign out, and an integer range of at most `MAX_INTEGER_CHOICES`
  values is written as its values; other bounds and `multipleOf` are left to validation.

Whitespace between tokens is limited (`WHITESPACE`: one optional line break and a short indent), so a small model
cannot spend its output limit on blank space. Rule names are `root` and `r<N>`: plain letters and digits, which
both grammar dialects read.
"""

from __future__ import annotations

from typing import Any

import orjson

MAX_BOUNDED_REPEAT = 256
"""Counts (`maxLength`, `maxItems`, …) up to this are written into the grammar; larger ones are left to
validation (llama.cpp expands a bounded repetition into as many rules)."""
MAX_INTEGER_CHOICES = 64
"""An integer range `minimum..maximum` of at most this many values is written as its values."""
WHITESPACE = '( " " | "\\n" [ \\t]{0,16} )?'
_CHAR = '( [^"\\\\\\x00-\\x1F] | "\\\\" ( ["\\\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )'
_DIGITS = "[0-9]"
_INTEGER = '( "0" | [1-9] [0-9]{0,15} )'
_FRACTION = '( "." [0-9]{1,24} )?'
_EXPONENT = '( [eE] [-+]? [0-9]{1,3} )?'


def literal(text: str) -> str:
    """`text` as a GBNF string literal."""
    escaped = []
    for char in text:
        if char in '"\\':
            escaped.append("\\" + char)
        elif char == "\n":
            escaped.append("\\n")
        elif char == "\r":
            escaped.append("\\r")
        elif char == "\t":
            escaped.append("\\t")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\x{ord(char):02X}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def char_class(chars: str, *, negated: bool = False) -> str:
    """A GBNF character class of `chars` (or of every character but them)."""
    body = "".join("\\" + c if c in "]\\^-[" else ("\\n" if c == "\n" else c) for c in sorted(set(chars)))
    return "[" + ("^" if negated else "") + body + "]"


def json_literal(value: Any) -> str:
    """A JSON value written as a GBNF literal: an `enum` or `const` value the model must write exactly."""
    return literal(orjson.dumps(value).decode())


class Grammar:
    """Rules being written; `rule` adds one (the same body twice is one rule) and `text` is the grammar."""

    def __init__(self) -> None:
        self._rules: dict[str, str] = {}
        self._names: dict[str, str] = {}
        self._any: str | None = None
        self._until: dict[str, str] = {}

    def reserve(self) -> str:
        """A new rule's name, its body to be given by `define`: a rule that refers to itself."""
        name = f"r{len(self._rules)}"
        self._rules[name] = ""
        return name

    def define(self, name: str, body: str) -> None:
        self._rules[name] = body

    def rule(self, body: str) -> str:
        """The name of a rule for `body` (a new one unless the same body has one)."""
        name = self._names.get(body)
        if name is None:
            name = self._names[body] = self.reserve()
            self.define(name, body)
        return name

    def text(self, root: str) -> str:
        """The grammar, `root ::= ROOT` first."""
        return "\n".join([f"root ::= {root}"] + [f"{name} ::= {body}" for name, body in self._rules.items()]) + "\n"

    @property
    def ws(self) -> str:
        return self.rule(WHITESPACE)

    def json_value(self, schema: dict | None) -> str:
        """The rule for a JSON value held to `schema` (None or `{}`: any value)."""
        return _SchemaRules(self).value(schema if schema is not None else {})

    def any_object(self) -> str:
        """Any JSON object (`json_object`)."""
        return _SchemaRules(self).object({"type": "object"})

    def any_value(self) -> str:
        """Any JSON value: one recursive rule per grammar."""
        if self._any is None:
            self._any = name = self.reserve()  # named first: an object's or array's values are this rule again
            rules = _SchemaRules(self)
            kinds = [rules.object({}), rules.array({}), rules.string({}), rules.number({})]
            self.define(name, " | ".join(kinds + ['"true"', '"false"', '"null"']))
        return self._any

    def text_until(self, end: str) -> str:
        """Any text that ends with its first `end`: a reasoning section up to and with its closing tag.

        Written as the automaton that looks for `end` (Knuth–Morris–Pratt): one rule per number of characters of
        `end` matched so far, so the text may hold anything (a partial `end` too) but `end` itself before its end.
        """
        if end in self._until:
            return self._until[end]
        states = [self.reserve() for _ in end]
        self._until[end] = states[0]
        for state, name in enumerate(states):
            moves = {char: _next_state(end, state, char) for char in set(end)}
            options = [literal(char) + ("" if target == len(end) else " " + states[target])
                       for char, target in sorted(moves.items()) if target != 0]
            onward = "".join(char for char, target in moves.items() if target != 0)
            options.append(char_class(onward, negated=True) + " " + states[0])
            self.define(name, " | ".join(options))
        return states[0]


def _next_state(pattern: str, state: int, char: str) -> int:
    """Characters of `pattern` matched after `char`, having matched `state` of them."""
    text = pattern[:state] + char
    for length in range(min(len(text), len(pattern)), 0, -1):
        if text.endswith(pattern[:length]):
            return length
    return 0


class _SchemaRules:
    """One schema's rules, written into a `Grammar`."""

    def __init__(self, grammar: Grammar) -> None:
        self.g = grammar

    def value(self, schema: dict) -> str:
        if "const" in schema:
            return self.g.rule(json_literal(schema["const"]))
        if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
            return self.g.rule(" | ".join(json_literal(v) for v in schema["enum"]))
        if "anyOf" in schema and isinstance(schema["anyOf"], list) and schema["anyOf"]:
            return self.g.rule(" | ".join(self.value(s if isinstance(s, dict) else {}) for s in schema["anyOf"]))
        kind = schema.get("type")
        kinds = kind if isinstance(kind, list) else [kind] if isinstance(kind, str) else []
        if not kinds:
            return self.g.any_value()
        typed = [self._typed(schema, k) for k in kinds]
        return typed[0] if len(typed) == 1 else self.g.rule(" | ".join(typed))

    def _typed(self, schema: dict, kind: str) -> str:
        if kind == "object":
            return self.object(schema)
        if kind == "array":
            return self.array(schema)
        if kind == "string":
            return self.string(schema)
        if kind == "integer":
            return self._integer(schema)
        if kind == "number":
            return self.number(schema)
        if kind == "boolean":
            return self.g.rule('"true" | "false"')
        return self.g.rule('"null"')

    def object(self, schema: dict) -> str:
        ws = self.g.ws
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            extra = schema.get("additionalProperties")
            member = self.g.rule(f'{self.string({})} {ws} ":" {ws} '
                                 f'{self.value(extra if isinstance(extra, dict) else {})}')
            if extra is False:
                return self.g.rule(f'"{{" {ws} "}}"')
            return self.g.rule(f'"{{" {ws} ( {member} ( {ws} "," {ws} {member} )* {ws} )? "}}"')
        required = [name for name in properties if name in (schema.get("required") or ())]
        optional = [name for name in properties if name not in required]
        pairs = {name: self.g.rule(f'{literal(orjson.dumps(name).decode())} {ws} ":" {ws} '
                                   f'{self.value(properties[name] if isinstance(properties[name], dict) else {})}')
                 for name in properties}
        comma = f'{ws} "," {ws}'
        # tails[i]: each optional property from the i-th on, present or not, in order (one rule each, so the
        # grammar grows with the properties, not with their square)
        tails = [""] * (len(optional) + 1)
        for index in range(len(optional) - 1, -1, -1):
            tails[index] = self.g.rule(f"( {comma} {pairs[optional[index]]} )? {tails[index + 1]}".rstrip())
        if required:
            body = f" {comma} ".join(pairs[name] for name in required) + f" {tails[0]}"
        else:  # any subset of the optional ones, in order: the first present, then each later one or not
            firsts = [f"{pairs[name]} {tails[index + 1]}".rstrip() for index, name in enumerate(optional)]
            body = "( " + " | ".join(firsts) + " )?"
        return self.g.rule(f'"{{" {ws} {body} {ws} "}}"')

    def array(self, schema: dict) -> str:
        ws = self.g.ws
        items = schema.get("items")
        item = self.value(items if isinstance(items, dict) else {})
        low, high = _counts(schema, "minItems", "maxItems")
        if high == 0:
            return self.g.rule(f'"[" {ws} "]"')
        more = self.g.rule(f'{ws} "," {ws} {item}')
        repeat = _repeat(more, max(low - 1, 0), None if high is None else high - 1)
        items_body = f"{item} {repeat}".rstrip()
        body = f"{items_body}" if low > 0 else f"( {items_body} )?"
        return self.g.rule(f'"[" {ws} {body} {ws} "]"')

    def string(self, schema: dict) -> str:
        char = self.g.rule(_CHAR)
        low, high = _counts(schema, "minLength", "maxLength")
        return self.g.rule(f'"\\"" {_repeat(char, low, high)} "\\""')

    def _integer(self, schema: dict) -> str:
        low, high = _integer_bounds(schema)
        if low is not None and high is not None and 0 < high - low + 1 <= MAX_INTEGER_CHOICES:
            return self.g.rule(" | ".join(f'"{n}"' for n in range(low, high + 1)))
        if low is not None and high is not None and low > high:
            return self.g.rule(_INTEGER)  # nothing fits: validation says so
        sign = "" if low is not None and low >= 0 else '"-"? '
        return self.g.rule(f"{sign}{_INTEGER}")

    def number(self, schema: dict) -> str:
        ranged = self._small_range(schema)
        if ranged is not None:
            return ranged
        minimum = _bound(schema.get("minimum"))
        exclusive = _bound(schema.get("exclusiveMinimum"))
        non_negative = (minimum is not None and minimum >= 0) or (exclusive is not None and exclusive >= 0)
        sign = "" if non_negative else '"-"? '
        return self.g.rule(f"{sign}{_INTEGER} {_FRACTION} {_EXPONENT}")


    def _small_range(self, schema: dict) -> str | None:
        """A number between two whole bounds `0 <= minimum < maximum` at most `MAX_INTEGER_CHOICES` apart (a score
        from 0 to 1, a rating from 1 to 5): each whole part below the maximum with any fraction, then the maximum
        itself (`1`, `1.0`). Exclusive bounds and fractional ones are left to validation."""
        low, high = _bound(schema.get("minimum")), _bound(schema.get("maximum"))
        if low is None or high is None or low != int(low) or high != int(high) or low < 0 \
                or not 0 < high - low <= MAX_INTEGER_CHOICES:
            return None
        below = " | ".join(f'"{n}"' for n in range(int(low), int(high)))
        return self.g.rule(f'( {below} ) {_FRACTION} | "{int(high)}" ( "." "0"{{1,16}} )?')


def _repeat(rule: str, low: int, high: int | None) -> str:
    """`rule` `low` to `high` times (None: no upper bound)."""
    if high is None:
        return f"{rule}*" if low == 0 else (f"{rule}+" if low == 1 else f"{rule}{{{low},}}")
    if high == 0:
        return ""
    if (low, high) == (0, 1):
        return f"{rule}?"
    return f"{rule}{{{low},{high}}}" if low != high else f"{rule}{{{low}}}"


def _counts(schema: dict, least: str, most: str) -> tuple[int, int | None]:
    """The bounds `least`..`most` a repetition is written with: a bound past `MAX_BOUNDED_REPEAT` is left to
    validation (0 and None: unbounded)."""
    low, high = _count(schema.get(least)), _count(schema.get(most))
    return (low if low is not None and low <= MAX_BOUNDED_REPEAT else 0,
            high if high is not None and high <= MAX_BOUNDED_REPEAT else None)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _bound(value: Any) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _integer_bounds(schema: dict) -> tuple[int | None, int | None]:
    """The least and greatest integer the numeric bounds allow (None: unbounded on that side)."""
    import math

    lows, highs = [], []
    if (value := _bound(schema.get("minimum"))) is not None:
        lows.append(math.ceil(value))
    if (value := _bound(schema.get("exclusiveMinimum"))) is not None:
        lows.append(math.floor(value) + 1)
    if (value := _bound(schema.get("maximum"))) is not None:
        highs.append(math.floor(value))
    if (value := _bound(schema.get("exclusiveMaximum"))) is not None:
        highs.append(math.ceil(value) - 1)
    return (max(lows) if lows else None), (min(highs) if highs else None)
