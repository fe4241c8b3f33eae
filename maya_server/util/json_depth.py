"""A nesting limit for every JSON value Maya parses: request bodies and model or tool JSON.

Why: orjson writes at most 254 levels and Python's `json` recurses per level,
so a value nested a few hundred levels deep would parse, pass validation and
then fail when it is written back (a stored response, an SSE event, a rendered
prompt): a 500 after the whole generation, or a stream cut short. Refusing
depth at the parse boundary makes every accepted value one Maya can write.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import TooDeep

MAX_JSON_DEPTH = 64
"""The default limit, in container levels (`{"a": [1]}` is 2 deep); `--max-json-depth` sets the request one."""


def too_deep(value: Any, limit: int) -> tuple | None:
    """The location (keys and indexes) of the first container deeper than `limit`, or None.

    Iterative, so a hostile value cannot exhaust the Python stack while being checked: a fast
    level-by-level pass says whether any container is too deep, and only then a second pass
    finds where.
    """
    level = [value]
    for _ in range(limit):
        level = [child for node in level for child in _children(node) if isinstance(child, (dict, list))]
        if not level:
            return None
    return _deep_path(value, limit)


def _children(node: Any):
    return node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()


def _deep_path(value: Any, limit: int) -> tuple:
    stack: list[tuple[Any, int, tuple]] = [(value, 1, ())]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, dict):
            children = node.items()
        elif isinstance(node, list):
            children = enumerate(node)
        else:
            continue
        if depth > limit:
            return path
        for key, child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1, path + (key,)))
    return ()


def loads_bounded(text: str, limit: int = MAX_JSON_DEPTH, **options: Any) -> Any:
    """`json.loads`, refusing (TooDeep) a value nested past `limit` or too deep to parse at all."""
    try:
        value = json.loads(text, **options)
    except RecursionError:
        raise TooDeep(f"JSON nested deeper than {limit} levels") from None
    if too_deep(value, limit) is not None:
        raise TooDeep(f"JSON nested deeper than {limit} levels")
    return value


def reject_constant(name: str) -> float:
    """`parse_constant` for model output: `NaN`, `Infinity` and `-Infinity` are Python's extensions, not JSON, and
    a client's `JSON.parse` refuses them, so text that uses them is not valid JSON here either."""
    raise ValueError(f"{name} is not JSON")
