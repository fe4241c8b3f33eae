"""`tools` and `tool_choice` of a Responses request: function tools only, with unique, well-formed names; every
hosted, custom or namespace tool, deferred loading and programmatic callers refused at the field that asked
(with a hint for clients known to send them by default); a strict tool's parameters checked; and a named or
`required` choice that the declared tools cannot satisfy is a 400."""

from __future__ import annotations

import pytest

from maya_server.errors import InvalidRequestError
from maya_server.responses.request.tools import (
    FunctionTool, FunctionToolChoice, check_tool_choice, parse_tool_choice, parse_tools,
)

OBJECT = {"type": "object", "properties": {}, "additionalProperties": False}


def _fn(name="get_weather", **fields):
    return {"type": "function", "name": name, **fields}


def _refused(call, *args) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as caught:
        call(*args)
    assert caught.value.status == 400 and caught.value.type == "invalid_request_error"
    return caught.value


def test_function_tools_parse_in_order():
    tools = parse_tools([_fn("a.b-c_1", description="d", parameters=OBJECT, strict=True), _fn("second")])
    assert [t.name for t in tools] == ["a.b-c_1", "second"] and isinstance(tools[0], FunctionTool)
    assert parse_tools([]) == ()


@pytest.mark.parametrize("raw, param", [
    ({"type": "function"}, "tools"),
    (["not an object"], "tools[0]"),
    ([_fn(), _fn()], "tools[1].name"),
    ([_fn("has space")], "tools[0].name"),
    ([_fn("x" * 65)], "tools[0].name"),
    ([{"name": "f"}], "tools[0].type"),
    ([_fn(output_schema={})], "tools[0].output_schema"),
    ([_fn(defer_loading=True)], "tools[0].defer_loading"),
    ([_fn(allowed_callers=["direct", "programmatic"])], "tools[0].allowed_callers"),
    ([_fn(strict=True)], "tools[0].parameters"),
    ([_fn(strict="yes")], "tools[0].strict"),
])
def test_a_bad_tool_is_a_400_at_its_field(raw, param):
    assert _refused(parse_tools, raw).param == param


def test_a_duplicate_name_says_which():
    assert "'f' is declared more than once" in _refused(parse_tools, [_fn("f"), _fn("g"), _fn("f")]).message


@pytest.mark.parametrize("kind, hint", [("web_search", "web_search = \"disabled\""), ("namespace", "[agents]"),
                                        ("file_search", None), ("mcp", None)])
def test_hosted_tools_are_refused_at_their_type_with_a_client_hint_when_known(kind, hint):
    error = _refused(parse_tools, [_fn(), {"type": kind}])
    assert error.param == "tools[1].type" and f"Tool type {kind!r} is not supported" in error.message
    assert (hint in error.message) if hint else "Codex" not in error.message


def test_deferred_loading_false_and_direct_callers_are_accepted():
    (tool,) = parse_tools([_fn(defer_loading=False, allowed_callers=["direct"])])
    assert tool.allowed_callers == ["direct"]


@pytest.mark.parametrize("mode", ["auto", "none", "required"])
def test_tool_choice_modes_pass_through(mode):
    assert parse_tool_choice(mode) == mode


def test_a_named_tool_choice_parses():
    assert parse_tool_choice({"type": "function", "name": "f"}) == FunctionToolChoice(type="function", name="f")


@pytest.mark.parametrize("raw, param", [
    ("always", "tool_choice"),
    (3, "tool_choice"),
    ({"name": "f"}, "tool_choice.type"),
    ({"type": "allowed_tools", "tools": []}, "tool_choice.type"),
    ({"type": "function", "name": ""}, "tool_choice.name"),
])
def test_a_bad_tool_choice_is_a_400_at_its_field(raw, param):
    assert _refused(parse_tool_choice, raw).param == param


def test_check_tool_choice_needs_the_named_function_declared_and_required_needs_one():
    tools = parse_tools([_fn("f")])
    check_tool_choice(FunctionToolChoice(type="function", name="f"), tools)
    check_tool_choice("required", tools)
    check_tool_choice("auto", ())
    assert _refused(check_tool_choice, FunctionToolChoice(type="function", name="g"), tools).param == \
        "tool_choice.name"
    assert _refused(check_tool_choice, "required", ()).param == "tool_choice"
