"""`tools` and `tool_choice` of a Responses request: function tools only.

Hosted tools (web search, file search, computer use, code interpreter, image
generation, MCP, shells, patches, tool search), custom grammar tools and
namespace tools have no engine behind them in Maya, so each is refused at
`tools[i].type` instead of being accepted and never called.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence, Union

from pydantic import Field, StrictBool, StrictStr

from ...errors import InvalidRequestError
from ...util.validation import validate_model
from ...structured.strict import check_strict_parameters
from ...util.wire import Wire, bad_value, path, reject_unsupported, tag

_NAME_PATTERN = r"^[A-Za-z0-9_.\-]{1,64}$"
_CHOICE_MODES = ("auto", "none", "required")


class FunctionTool(Wire):
    type: Literal["function"]
    name: StrictStr = Field(pattern=_NAME_PATTERN)
    description: StrictStr | None = None
    parameters: dict[str, Any] | None = None
    strict: StrictBool | None = None
    defer_loading: StrictBool | None = None
    allowed_callers: list[Literal["direct", "programmatic"]] | None = None
    output_schema: dict[str, Any] | None = None


class FunctionToolChoice(Wire):
    type: Literal["function"]
    name: StrictStr = Field(min_length=1)


ToolChoice = Union[Literal["auto", "none", "required"], FunctionToolChoice]

_UNSUPPORTED_TOOL_FIELDS = {
    "output_schema": "Maya does not use function output schemas.",
}


def parse_tools(raw: Any, prefix: Sequence[Any] = ("tools",)) -> tuple[FunctionTool, ...]:
    """Function tools with unique names; a strict tool's parameters must fit the supported schema subset."""
    if not isinstance(raw, list):
        raise InvalidRequestError(f"Invalid type for '{path(prefix)}': expected an array.", param=path(prefix))
    tools = tuple(_parse_tool(t, (*prefix, i)) for i, t in enumerate(raw))
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        if tool.name in seen:
            raise bad_value(path(prefix, i, "name"), f"the function name {tool.name!r} is declared more than once.")
        seen.add(tool.name)
    return tools


def _parse_tool(raw: Any, prefix: Sequence[Any]) -> FunctionTool:
    if not isinstance(raw, dict):
        raise InvalidRequestError(f"Invalid type for '{path(prefix)}': expected an object.", param=path(prefix))
    kind = tag(raw, "type", prefix)
    if kind != "function":
        raise _unsupported_tool(kind, prefix)
    tool = validate_model(FunctionTool, raw, prefix=prefix)
    reject_unsupported(tool, prefix, _UNSUPPORTED_TOOL_FIELDS)
    if tool.defer_loading:
        raise InvalidRequestError(
            f"'{path(prefix, 'defer_loading')}' is not supported: deferred tools need a hosted tool search.",
            param=path(prefix, "defer_loading"),
        )
    if tool.allowed_callers and "programmatic" in tool.allowed_callers:
        raise InvalidRequestError(
            f"'{path(prefix, 'allowed_callers')}' is not supported: Maya has no programmatic tool calling.",
            param=path(prefix, "allowed_callers"),
        )
    if tool.strict:
        check_strict_parameters(tool.parameters, path(prefix, "parameters"))
    return tool


_CLIENT_HINTS = {
    "web_search": " (Codex CLI: web_search = \"disabled\" in config.toml)",
    "web_search_preview": " (Codex CLI: web_search = \"disabled\" in config.toml)",
    "namespace": " (Codex CLI: [agents] enabled = false in config.toml)",
}
"""What to set in a client known to send a tool type by default."""


def _unsupported_tool(kind: Any, prefix: Sequence[Any]) -> InvalidRequestError:
    where = path(prefix, "type")
    if kind is None:
        return InvalidRequestError(f"Missing required parameter: '{where}'.", param=where)
    return InvalidRequestError(
        f"Tool type {kind!r} is not supported: Maya serves only 'function' tools; hosted, custom and "
        f"namespace tools are not available. Leave them out of 'tools'{_CLIENT_HINTS.get(kind, '')}.",
        param=where,
    )


def parse_tool_choice(raw: Any, prefix: Sequence[Any] = ("tool_choice",)) -> ToolChoice:
    """'auto' | 'none' | 'required' | {"type": "function", "name": ...}; hosted and allowed_tools are refused."""
    where = path(prefix)
    if isinstance(raw, str):
        if raw not in _CHOICE_MODES:
            raise bad_value(where, f"{raw!r}. Supported values are 'auto', 'none' and 'required'.")
        return raw  # type: ignore[return-value]
    if not isinstance(raw, dict):
        raise InvalidRequestError(f"Invalid type for '{where}': expected a string or an object.", param=where)
    kind = tag(raw, "type", prefix)
    if kind == "function":
        return validate_model(FunctionToolChoice, raw, prefix=prefix)
    if kind is None:
        raise InvalidRequestError(f"Missing required parameter: '{path(prefix, 'type')}'.", param=path(prefix, "type"))
    raise InvalidRequestError(
        f"tool_choice type {kind!r} is not supported: use 'auto', 'none', 'required' or "
        '{"type": "function", "name": ...}.',
        param=path(prefix, "type"),
    )


def check_tool_choice(choice: ToolChoice, tools: Sequence[FunctionTool]) -> None:
    """A named choice must name a declared function; 'required' needs at least one."""
    names = {t.name for t in tools}
    if isinstance(choice, FunctionToolChoice) and choice.name not in names:
        raise bad_value("tool_choice.name", f"the function {choice.name!r} is not declared in 'tools'.")
    if choice == "required" and not names:
        raise bad_value("tool_choice", "'required' needs at least one function in 'tools'.")
