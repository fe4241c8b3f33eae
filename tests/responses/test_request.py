"""Top-level request fields: every rejection names its exact `param`; accepted values parse."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from maya_server.responses.request.items import MessageItem
from maya_server.responses.request.tools import FunctionToolChoice
from maya_server.structured.formats import JsonObjectFormat, TextFormat

from tests.responses.helpers import STRICT_PARAMS, TOOL, parse, rejected

LONG = "k" * 65
REJECTIONS = [
    ("unknown field", {"temprature": 1}, "temprature"),
    ("model type", {"model": 5}, "model"),
    ("input missing", {"input": ...}, "input"),
    ("input type", {"input": 5}, "input"),
    ("instructions type", {"instructions": ["x"]}, "instructions"),
    ("parallel_tool_calls type", {"parallel_tool_calls": "yes"}, "parallel_tool_calls"),
    ("effort unknown", {"reasoning": {"effort": "extreme"}}, "reasoning.effort"),
    ("reasoning summary", {"reasoning": {"effort": "low", "summary": "auto"}}, "reasoning.summary"),
    ("reasoning generate_summary", {"reasoning": {"generate_summary": "concise"}}, "reasoning.generate_summary"),
    ("reasoning context", {"reasoning": {"context": "all_turns"}}, "reasoning.context"),
    ("reasoning mode", {"reasoning": {"mode": "pro"}}, "reasoning.mode"),
    ("reasoning unknown", {"reasoning": {"budget": 5}}, "reasoning.budget"),
    ("temperature high", {"temperature": 2.5}, "temperature"),
    ("temperature negative", {"temperature": -0.1}, "temperature"),
    ("temperature string", {"temperature": "1"}, "temperature"),
    ("top_p high", {"top_p": 1.5}, "top_p"),
    ("top_p bool", {"top_p": True}, "top_p"),
    ("max_output_tokens below 16", {"max_output_tokens": 15}, "max_output_tokens"),
    ("max_output_tokens float", {"max_output_tokens": 100.0}, "max_output_tokens"),
    ("max_output_tokens bool", {"max_output_tokens": True}, "max_output_tokens"),
    ("max_tool_calls negative", {"max_tool_calls": -1}, "max_tool_calls"),
    ("metadata 17 pairs", {"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
    ("metadata long key", {"metadata": {LONG: "v"}}, "metadata"),
    ("metadata long value", {"metadata": {"k": "v" * 513}}, "metadata.k"),
    ("metadata value type", {"metadata": {"k": 1}}, "metadata.k"),
    ("metadata type", {"metadata": ["k"]}, "metadata"),
    ("prompt_cache_key long", {"prompt_cache_key": "p" * 257}, "prompt_cache_key"),
    ("prompt_cache_key type", {"prompt_cache_key": 7}, "prompt_cache_key"),
    ("client_metadata value type", {"client_metadata": {"k": 1}}, "client_metadata.k"),
    ("client_metadata over 16 KiB", {"client_metadata": {"k": "v" * 16384}}, "client_metadata"),
    ("include other value", {"include": ["message.output_text.logprobs"]}, "include[0]"),
    ("include second value", {"include": ["reasoning.encrypted_content", "file_search_call.results"],
                              "reasoning": {"effort": "none"}}, "include[1]"),
    ("include without effort", {"include": ["reasoning.encrypted_content"]}, "include[0]"),
    ("include with effort low", {"include": ["reasoning.encrypted_content"], "reasoning": {"effort": "low"}},
     "include[0]"),
    ("include type", {"include": "reasoning.encrypted_content"}, "include"),
    ("store type", {"store": "yes"}, "store"),
    ("background without store", {"background": True}, "background"),
    ("background with store false", {"background": True, "store": False}, "background"),
    ("stream type", {"stream": "true"}, "stream"),
    ("stream_options unknown", {"stream": True, "stream_options": {"include_usage": True}},
     "stream_options.include_usage"),
    ("previous_response_id type", {"previous_response_id": 5}, "previous_response_id"),
    ("previous_response_id empty", {"previous_response_id": ""}, "previous_response_id"),
    ("conversation", {"conversation": "conv_123"}, "conversation"),
    ("conversation object", {"conversation": {"id": "conv_123"}}, "conversation"),
    ("truncation auto", {"truncation": "auto"}, "truncation"),
    ("truncation unknown", {"truncation": "middle"}, "truncation"),
    ("service_tier flex", {"service_tier": "flex"}, "service_tier"),
    ("service_tier priority", {"service_tier": "priority"}, "service_tier"),
    ("user type", {"user": 5}, "user"),
    ("safety_identifier long", {"safety_identifier": "s" * 129}, "safety_identifier"),
    ("top_logprobs nonzero", {"top_logprobs": 5}, "top_logprobs"),
    ("top_logprobs range", {"top_logprobs": 21}, "top_logprobs"),
    ("prompt", {"prompt": {"id": "pmpt_1"}}, "prompt"),
    ("prompt_cache_options", {"prompt_cache_options": {"ttl": "12h"}}, "prompt_cache_options"),
    ("prompt_cache_retention", {"prompt_cache_retention": "24h"}, "prompt_cache_retention"),
    ("context_management", {"context_management": [{"type": "compaction"}]}, "context_management"),
    ("background_options", {"background_options": {"completion_window": "2h"}}, "background_options"),
    ("moderation", {"moderation": {"model": "omni-moderation-latest"}}, "moderation"),
    ("image options", {"image": {"context_compression": "enabled"}}, "image"),
    ("access_programs", {"access_programs": {"cyber": "standard"}}, "access_programs"),
    ("text type", {"text": "json"}, "text"),
    ("text unknown", {"text": {"fmt": {}}}, "text.fmt"),
    ("format unknown type", {"text": {"format": {"type": "xml"}}}, "text.format.type"),
    ("format missing type", {"text": {"format": {}}}, "text.format.type"),
    ("format json_schema without name", {"text": {"format": {"type": "json_schema", "schema": STRICT_PARAMS}}},
     "text.format.name"),
    ("format name pattern", {"text": {"format": {"type": "json_schema", "name": "a b", "schema": STRICT_PARAMS}}},
     "text.format.name"),
    ("format without schema", {"text": {"format": {"type": "json_schema", "name": "a"}}}, "text.format.schema"),
    ("format schema type", {"text": {"format": {"type": "json_schema", "name": "a", "schema": []}}},
     "text.format.schema"),
    ("format strict type", {"text": {"format": {"type": "json_schema", "name": "a", "schema": STRICT_PARAMS,
                                                "strict": "yes"}}}, "text.format.strict"),
    ("format json_object extra", {"text": {"format": {"type": "json_object", "schema": {}}}}, "text.format.schema"),
    ("schema root array", {"text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": "array"}}}},
     "text.format.schema.type"),
    ("schema pattern", {"text": {"format": {"type": "json_schema", "name": "a", "schema": {
        "type": "object", "properties": {"name": {"type": "string", "pattern": "^a"}}}}}},
     "text.format.schema.properties.name.pattern"),
    ("verbosity low", {"text": {"verbosity": "low"}}, "text.verbosity"),
    ("verbosity unknown", {"text": {"verbosity": "loud"}}, "text.verbosity"),
    ("tools type", {"tools": {"type": "function"}}, "tools"),
    ("tool item type", {"tools": ["lookup"]}, "tools[0]"),
    ("tool missing type", {"tools": [{"name": "lookup"}]}, "tools[0].type"),
    ("tool name pattern", {"tools": [{**TOOL, "name": "look up"}]}, "tools[0].name"),
    ("tool name long", {"tools": [{**TOOL, "name": "x" * 65}]}, "tools[0].name"),
    ("tool missing name", {"tools": [{"type": "function"}]}, "tools[0].name"),
    ("tool duplicate name", {"tools": [TOOL, TOOL]}, "tools[1].name"),
    ("tool parameters type", {"tools": [{**TOOL, "parameters": "{}"}]}, "tools[0].parameters"),
    ("tool strict type", {"tools": [{**TOOL, "strict": 1}]}, "tools[0].strict"),
    ("tool unknown field", {"tools": [{**TOOL, "function": {}}]}, "tools[0].function"),
    ("tool defer_loading", {"tools": [{**TOOL, "defer_loading": True}]}, "tools[0].defer_loading"),
    ("tool programmatic caller", {"tools": [{**TOOL, "allowed_callers": ["programmatic"]}]},
     "tools[0].allowed_callers"),
    ("tool output_schema", {"tools": [{**TOOL, "output_schema": {"type": "object"}}]}, "tools[0].output_schema"),
    ("strict tool without parameters", {"tools": [{"type": "function", "name": "f", "strict": True}]},
     "tools[0].parameters"),
    ("strict tool pattern", {"tools": [{"type": "function", "name": "f", "strict": True, "parameters": {
        "type": "object", "properties": {"q": {"type": "string", "pattern": "x"}}, "required": ["q"],
        "additionalProperties": False}}]}, "tools[0].parameters.properties.q.pattern"),
    ("strict tool optional property", {"tools": [{"type": "function", "name": "f", "strict": True, "parameters": {
        **STRICT_PARAMS, "required": []}}]}, "tools[0].parameters.required"),
    ("strict tool open object", {"tools": [{"type": "function", "name": "f", "strict": True, "parameters": {
        "type": "object", "properties": {}}}]}, "tools[0].parameters.additionalProperties"),
    ("tool_choice unknown", {"tool_choice": "any", "tools": [TOOL]}, "tool_choice"),
    ("tool_choice type", {"tool_choice": 1, "tools": [TOOL]}, "tool_choice"),
    ("tool_choice undeclared", {"tool_choice": {"type": "function", "name": "nope"}, "tools": [TOOL]},
     "tool_choice.name"),
    ("tool_choice without name", {"tool_choice": {"type": "function"}, "tools": [TOOL]}, "tool_choice.name"),
    ("tool_choice hosted", {"tool_choice": {"type": "web_search_preview"}}, "tool_choice.type"),
    ("tool_choice allowed_tools", {"tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": [TOOL]},
                                   "tools": [TOOL]}, "tool_choice.type"),
    ("tool_choice mcp", {"tool_choice": {"type": "mcp", "server_label": "x"}}, "tool_choice.type"),
    ("tool_choice custom", {"tool_choice": {"type": "custom", "name": "x"}}, "tool_choice.type"),
    ("tool_choice missing type", {"tool_choice": {"name": "lookup"}, "tools": [TOOL]}, "tool_choice.type"),
    ("tool_choice required without tools", {"tool_choice": "required"}, "tool_choice"),
]


@pytest.mark.parametrize("fields, param", [pytest.param(f, p, id=n) for n, f, p in REJECTIONS])
def test_rejections_name_the_exact_param(fields, param):
    assert rejected(**fields).param == param


HOSTED_TOOLS = [
    {"type": "web_search"}, {"type": "web_search_preview"}, {"type": "file_search", "vector_store_ids": ["vs"]},
    {"type": "computer_use_preview", "display_width": 1, "display_height": 1, "environment": "browser"},
    {"type": "computer"}, {"type": "code_interpreter", "container": {"type": "auto"}}, {"type": "image_generation"},
    {"type": "mcp", "server_label": "x"}, {"type": "local_shell"}, {"type": "shell"}, {"type": "apply_patch"},
    {"type": "tool_search"}, {"type": "custom", "name": "grammar"}, {"type": "namespace", "name": "ns", "tools": []},
]


@pytest.mark.parametrize("tool", HOSTED_TOOLS, ids=[t["type"] for t in HOSTED_TOOLS])
def test_hosted_custom_and_namespace_tools_are_rejected_at_their_type(tool):
    error = rejected(tools=[TOOL, tool])
    assert error.param == "tools[1].type"
    assert "not supported" in error.message


def test_unsupported_messages_say_so():
    assert "not supported" in rejected(conversation="conv_1").message
    assert "not supported" in rejected(reasoning={"summary": "auto"}).message
    assert "Unrecognized" in rejected(temprature=1).message
    assert rejected(input=...).message == "Missing required parameter: 'input'."


def test_defaults():
    request = parse()
    assert request.input == (MessageItem(role="user", content=[{"type": "input_text", "text": "hi"}]),)
    assert request.stored is False and request.store is None
    assert request.tool_choice == "auto" and request.tools == ()
    assert request.output_format == TextFormat()
    assert request.effort is None


def test_accepted_values_at_their_limits():
    request = parse(
        temperature=2, top_p=0, max_output_tokens=16, max_tool_calls=0,
        metadata={("k" * 64 if i == 0 else f"k{i}"): "v" * 512 for i in range(16)},
        prompt_cache_key="p" * 256, client_metadata={"session": "abc"}, safety_identifier="s" * 128,
        user="u", top_logprobs=0, truncation="disabled", service_tier="default", stream=True,
        stream_options={"include_obfuscation": False}, parallel_tool_calls=False, instructions="Be brief.",
        text={"format": {"type": "json_object"}, "verbosity": "medium"},
    )
    assert request.temperature == 2 and request.max_output_tokens == 16
    assert request.output_format == JsonObjectFormat(type="json_object")
    assert parse(service_tier="auto").service_tier == "auto"


@pytest.mark.parametrize("effort", ["none", "minimal", "low", "medium", "high", "xhigh", "max"])
def test_reasoning_efforts(effort):
    """`max` parses too: whether the served family has it is the route's check (tests/responses/api/test_effort_tiers.py)."""
    assert parse(reasoning={"effort": effort}).effort == effort


def test_encrypted_reasoning_include_with_explicit_effort_none():
    request = parse(include=["reasoning.encrypted_content"], reasoning={"effort": "none"})
    assert request.include == ["reasoning.encrypted_content"]


def test_background_needs_explicit_store():
    request = parse(background=True, store=True)
    assert request.background and request.stored


def test_previous_response_id_may_stand_without_input():
    request = parse(input=..., previous_response_id="resp_1")
    assert request.input is None and request.previous_response_id == "resp_1"


def test_tool_choice_forms():
    assert parse(tools=[TOOL], tool_choice="required").tool_choice == "required"
    assert parse(tool_choice="none").tool_choice == "none"
    named = parse(tools=[TOOL], tool_choice={"type": "function", "name": "lookup"}).tool_choice
    assert named == FunctionToolChoice(type="function", name="lookup")


def test_function_tool_fields():
    tool = {"type": "function", "name": "f.x-1", "description": "d", "parameters": STRICT_PARAMS, "strict": True,
            "allowed_callers": ["direct"], "defer_loading": False}
    parsed = parse(tools=[tool, {"type": "function", "name": "g", "parameters": None, "strict": None}]).tools
    assert parsed[0].strict is True and parsed[0].parameters == STRICT_PARAMS
    assert parsed[1].parameters is None and parsed[1].strict is None


def test_non_strict_tool_parameters_are_not_schema_checked():
    loose = {"type": "object", "properties": {"q": {"type": "string", "pattern": "x", "format": "date"}}}
    assert parse(tools=[{**TOOL, "parameters": loose}]).tools[0].parameters == loose


def test_json_schema_format_echoes_with_the_wire_name():
    fmt = {"type": "json_schema", "name": "count", "schema": STRICT_PARAMS, "strict": True, "description": "d"}
    request = parse(text={"format": fmt})
    assert request.output_format.json_schema == STRICT_PARAMS
    assert request.text.format.model_dump(by_alias=True, exclude_none=True) == fmt


def test_null_optional_fields_are_defaults():
    request = parse(tools=None, tool_choice=None, text=None, reasoning=None, metadata=None, conversation=None,
                    prompt=None, include=None, truncation=None)
    assert request.tools == () and request.tool_choice == "auto" and request.output_format == TextFormat()


def test_request_is_frozen():
    request = parse()
    with pytest.raises(ValidationError):
        request.temperature = 1.0  # type: ignore[misc]
