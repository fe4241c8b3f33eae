"""Validate-before-publish for structured output and strict function tools.

Whether or not the engine was held to the schema while it wrote
(`grammar.py`: a grammar narrows what is written, but an engine may ignore or
refuse it, and some keywords are beyond it), Maya buffers the generated text and
publishes it only when the completed result is valid. `StructuredValidator` is that
check: a bounded JSON parse (4 MiB), instance limits (65,536 values, 32 nesting
levels), then Draft 2020-12 validation with `jsonschema` under a one-second
budget that is checked inside the traversal itself, so a pathological
instance cannot hold the event loop. Its verdict is a value, never an
exception: the publish gate (`gate.py`) replaces a held output whose
verdict is not ok with one `Failed` (`StructuredOutputError`), which each
API's assembler reports as its failure (Responses: `response.failed`; Chat
Completions: an error response or stream error event).

`jsonschema` is imported only when a schema is validated: plain text and
`json_object` requests never load it.
"""

from __future__ import annotations

import contextvars
import functools
import time
from dataclasses import dataclass
from typing import Any, Callable

import orjson

from ..errors import StructuredOutputRejected
from .formats import JsonObjectFormat, JsonSchemaFormat, OutputFormat

MAX_OUTPUT_BYTES = 4 * 1024 * 1024
MAX_INSTANCE_NODES = 65_536
MAX_INSTANCE_DEPTH = 32
VALIDATION_BUDGET_S = 1.0
_REASON_CHARS = 300
_MEASURE_CHECK_EVERY = 1024

Clock = Callable[[], float]


@dataclass(frozen=True)
class StructuredResult:
    """`ok` with the parsed `value`, or not ok with a `reason` fit for an error message."""

    ok: bool
    value: Any = None
    reason: str | None = None


class _Budget:
    def __init__(self, clock: Clock, seconds: float) -> None:
        self._clock = clock
        self._seconds = seconds
        self._deadline = clock() + seconds

    def check(self) -> None:
        if self._clock() > self._deadline:
            raise StructuredOutputRejected(f"structured-output validation exceeded its {self._seconds:g}-second budget")


_BUDGET: contextvars.ContextVar[_Budget] = contextvars.ContextVar("structured_validation_budget")


class StructuredValidator:
    """Checks one completed JSON text against an optional schema; the verdict is a value, never an exception.

    >>> StructuredValidator({"type": "object", "required": ["n"]}).validate('{"n": 1}').ok
    True
    """

    def __init__(
        self,
        schema: dict | None = None,
        *,
        clock: Clock = time.monotonic,
        budget_s: float = VALIDATION_BUDGET_S,
        max_bytes: int = MAX_OUTPUT_BYTES,
        max_nodes: int = MAX_INSTANCE_NODES,
        max_depth: int = MAX_INSTANCE_DEPTH,
    ) -> None:
        if schema is not None:  # the dialect it names was checked at request time; 2020-12 semantics apply
            schema = {key: value for key, value in schema.items() if key != "$schema"}
        self._validator = _budgeted_validator_class()(schema) if schema is not None else None
        self._clock = clock
        self._budget_s = budget_s
        self._max_bytes = max_bytes
        self._max_nodes = max_nodes
        self._max_depth = max_depth

    @classmethod
    def for_format(cls, fmt: OutputFormat, **options: Any) -> StructuredValidator | None:
        """None for plain text; `json_object` needs any object; `json_schema` its schema."""
        if isinstance(fmt, JsonSchemaFormat):
            return cls(fmt.json_schema, **options)
        if isinstance(fmt, JsonObjectFormat):
            return cls(None, **options)
        return None

    def validate(self, text: str | bytes) -> StructuredResult:
        """The verdict on `text`. It runs within one event-loop step (no cancel can land meanwhile); the time
        budget is what bounds it."""
        token = _BUDGET.set(_Budget(self._clock, self._budget_s))
        try:
            return StructuredResult(True, value=self._check(text))
        except StructuredOutputRejected as failure:
            return StructuredResult(False, reason=str(failure)[:_REASON_CHARS])
        finally:
            _BUDGET.reset(token)

    def _check(self, text: str | bytes) -> dict:
        data = text.encode() if isinstance(text, str) and len(text) <= self._max_bytes else text
        if len(data) > self._max_bytes:
            raise StructuredOutputRejected(f"the output exceeds the {self._max_bytes}-byte structured-output buffer")
        value = _parse(data)
        if not isinstance(value, dict):
            raise StructuredOutputRejected(f"the output must be a JSON object, not {_json_type(value)}")
        _BUDGET.get().check()
        _measure(value, self._max_nodes, self._max_depth)
        if self._validator is not None:
            _check_against_schema(self._validator, value)
        return value


def _parse(data: str | bytes) -> Any:
    """orjson's own nesting limit (deeper than any accepted output) reads as "too deep"."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc) or "recursion" in str(exc):
            raise StructuredOutputRejected(f"the output is nested more than {MAX_INSTANCE_DEPTH} levels deep") from None
        raise StructuredOutputRejected(f"the output is not valid JSON: {exc}") from None


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "null" if value is None else "a number"


def _measure(value: Any, max_nodes: int, max_depth: int) -> None:
    """Counts JSON values and container nesting without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    nodes = 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes % _MEASURE_CHECK_EVERY == 0:
            _BUDGET.get().check()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            raise StructuredOutputRejected(f"the output is nested more than {max_depth} levels deep")
        stack.extend((child, depth + 1) for child in children)
        if nodes + len(stack) > max_nodes:
            raise StructuredOutputRejected(f"the output has more than {max_nodes} JSON values")


def _check_against_schema(validator: Any, instance: dict) -> None:
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(instance))
    if error is not None:
        raise StructuredOutputRejected(f"the output does not match the schema at '{error.json_path}': {error.message}")


@functools.cache
def _budgeted_validator_class() -> type:
    """Draft 2020-12 with every keyword checking the active budget before it runs."""
    from jsonschema import Draft202012Validator, validators

    checked = {name: _with_budget(check) for name, check in Draft202012Validator.VALIDATORS.items()}
    return validators.extend(Draft202012Validator, checked)


def _with_budget(check: Callable) -> Callable:
    @functools.wraps(check)
    def budgeted(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _BUDGET.get().check()
        return check(validator, value, instance, schema)

    return budgeted
