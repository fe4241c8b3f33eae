"""Each family's tool-call syntax as grammar rules, for a turn that must call a tool (`tool_choice` required or
named; `pipeline/constraint.py`).

The calls are written as the family writes them back in history (the syntax its model learnt), with the
whitespace between pieces its parser accepts (`WHITESPACE`-like line breaks). A `strict` tool's arguments are held
to its schema; another tool's to any arguments the syntax can carry (any JSON object, any key/value pairs).

- Hermes (ChatML, Qwen): `<tool_call>\\n{"name": "NAME", "arguments": {…}}\\n</tool_call>`.
- GLM: `<tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>…</tool_call>`; a value whose schema
  is a plain string is its raw text (an `enum`'s values written raw), any other value JSON held to its schema.
- DeepSeek DSML (V4 and V4.1's tag spellings): the block, one `invoke` per call, one `parameter` per argument with
  `string="true"` (raw text) or `string="false"` (JSON).
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..neutral.conversation import ToolSpec
from ..structured.grammar import Grammar, json_literal, literal
from .argument_types import is_plain_string
from .dsml_parser import DsmlTags

_NEWLINES = '"\\n"{0,2}'
"""What may stand between two pieces of a call: the line break the family writes, or none, or a blank line."""


def _arguments(tool: ToolSpec, any_argument: Callable[[], str], argument: Callable[[str, object], str]) -> str:
    """A tool's arguments in a tagged syntax: for a strict tool each of its properties in order (`argument`: the
    rule for one, by name and schema; all are required, the strict rule), else any number of `any_argument()`."""
    if not tool.strict or not isinstance(tool.parameters, dict):
        return f"{any_argument()}*"
    properties = tool.parameters.get("properties")
    return " ".join(argument(key, schema) for key, schema in (properties or {}).items())


def _alternatives(g: Grammar, calls: list[str], parallel: bool, separator: str) -> str:
    """One call of `calls` (or, with `parallel`, one or more)."""
    call = g.rule(" | ".join(calls))
    return g.rule(f"{call} ( {separator} {call} )*") if parallel else call


def hermes_calls(g: Grammar, tools: Sequence[ToolSpec], parallel: bool) -> str:
    ws = g.ws
    calls = []
    for tool in tools:
        arguments = g.json_value(tool.parameters) if tool.strict else g.any_object()
        name = json_literal(tool.name)
        calls.append(g.rule(f'"<tool_call>" {_NEWLINES} "{{" {ws} "\\"name\\"" {ws} ":" {ws} {name} {ws} "," {ws} '
                            f'"\\"arguments\\"" {ws} ":" {ws} {arguments} {ws} "}}" {_NEWLINES} "</tool_call>"'))
    return _alternatives(g, calls, parallel, _NEWLINES)


def glm_calls(g: Grammar, tools: Sequence[ToolSpec], parallel: bool) -> str:
    calls = []

    def any_pair() -> str:
        return g.rule(f'"<arg_key>" {g.text_until("</arg_key>")} {_NEWLINES} "<arg_value>" '
                      f'{g.text_until("</arg_value>")} {_NEWLINES}')

    for tool in tools:
        arguments = _arguments(tool, any_pair, lambda key, schema: g.rule(
            f'"<arg_key>" {literal(key)} "</arg_key>" {_NEWLINES} "<arg_value>" '
            f'{_raw_or_json(g, schema, "</arg_value>")} {_NEWLINES}'))
        calls.append(g.rule(f'"<tool_call>" {literal(tool.name)} {_NEWLINES} {arguments} "</tool_call>"'))
    return _alternatives(g, calls, parallel, _NEWLINES)


def dsml_calls(g: Grammar, tools: Sequence[ToolSpec], parallel: bool, tags: DsmlTags, separator: str) -> str:
    """`separator`: what the family writes before the block (after text, or at the turn's start)."""
    calls = []
    opening = literal(tags.param_open)

    def any_parameter() -> str:
        raw = f'"string=\\"true\\">" {g.text_until(tags.param_close)}'
        json = f'"string=\\"false\\">" {g.any_value()} {literal(tags.param_close)}'
        return g.rule(f'{opening} {g.text_until(chr(34))} " " ( {raw} | {json} ) {_NEWLINES}')

    for tool in tools:
        arguments = _arguments(tool, any_parameter, lambda key, schema: g.rule(
            f'{opening} {literal(key)} "\\" string=\\"{"true" if _is_raw(schema) else "false"}\\">" '
            f'{_raw_or_json(g, schema, tags.param_close)} {_NEWLINES}'))
        calls.append(g.rule(f'{literal(tags.invoke_open + tool.name)} "\\">" {_NEWLINES} {arguments} '
                            f'{literal(tags.invoke_close)}'))
    invokes = _alternatives(g, calls, parallel, _NEWLINES)
    return g.rule(f'{literal(separator)}? {literal(tags.block_open)} {_NEWLINES} {invokes} {_NEWLINES} '
                  f'{literal(tags.block_close)}')


def _is_raw(schema: object) -> bool:
    return isinstance(schema, dict) and is_plain_string(schema)


def _raw_or_json(g: Grammar, schema: object, close: str) -> str:
    """A value up to and with its closing tag: raw text for a plain string (an `enum`'s or `const`'s values
    written raw), else JSON held to the schema."""
    if not isinstance(schema, dict):
        return f"{g.any_value()} {literal(close)}"
    if _is_raw(schema):
        values = [schema["const"]] if "const" in schema else schema.get("enum")
        if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
            return g.rule(" | ".join(literal(v) for v in values)) + " " + literal(close)
        return g.text_until(close)
    return f"{g.json_value(schema)} {literal(close)}"
