"""The request-derived fields of a response object: each echoes the request, with OpenAI's defaults where the
request left a field out (sampling defaults, `store` false, `parallel_tool_calls` true, `truncation`
disabled), a json_schema format always carrying `description` and `strict`, a named tool choice and every
tool in their full shape, and `client_metadata` never echoed."""

from __future__ import annotations

from maya_server.engine.base import DEFAULT_TEMPERATURE, DEFAULT_TOP_P
from maya_server.responses.assembly.envelope import response_envelope
from maya_server.responses.request.request import parse_responses_request

SCHEMA = {"type": "object", "properties": {}, "additionalProperties": False}


def _envelope(**fields) -> dict:
    return response_envelope(parse_responses_request({"input": "hi", **fields}), "served-model")


def test_a_bare_request_gets_the_openai_defaults():
    envelope = _envelope()
    assert envelope == {
        "model": "served-model", "instructions": None, "max_output_tokens": None, "max_tool_calls": None,
        "metadata": {}, "parallel_tool_calls": True, "previous_response_id": None, "prompt_cache_key": None,
        "reasoning": {"effort": None, "summary": None}, "safety_identifier": None, "service_tier": "default",
        "store": False, "background": False, "temperature": DEFAULT_TEMPERATURE, "top_p": DEFAULT_TOP_P,
        "presence_penalty": 0.0, "frequency_penalty": 0.0, "top_logprobs": 0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"}, "tool_choice": "auto", "tools": [],
        "truncation": "disabled", "user": None,
    }


def test_the_request_fields_are_echoed():
    envelope = _envelope(instructions="be brief", max_output_tokens=64, max_tool_calls=2, metadata={"k": "v"},
                         parallel_tool_calls=False, temperature=0.0, top_p=0.5, presence_penalty=0.5,
                         frequency_penalty=-1.0, top_logprobs=0, store=True, user="u", prompt_cache_key="pk",
                         safety_identifier="s")
    assert envelope["temperature"] == 0.0 and envelope["top_p"] == 0.5  # a zero is not replaced by the default
    assert envelope["parallel_tool_calls"] is False and envelope["store"] is True
    assert (envelope["instructions"], envelope["max_output_tokens"], envelope["max_tool_calls"]) == ("be brief", 64, 2)
    assert (envelope["presence_penalty"], envelope["frequency_penalty"], envelope["top_logprobs"]) == (0.5, -1.0, 0)
    assert envelope["metadata"] == {"k": "v"} and envelope["user"] == "u"
    assert (envelope["prompt_cache_key"], envelope["safety_identifier"]) == ("pk", "s")


def test_client_metadata_is_never_echoed():
    envelope = _envelope(client_metadata={"trace": "abc"})
    assert "client_metadata" not in envelope and "abc" not in repr(envelope)


def test_a_json_schema_format_always_carries_description_and_strict():
    fmt = _envelope(text={"format": {"type": "json_schema", "name": "out", "schema": SCHEMA}})["text"]["format"]
    assert fmt == {"type": "json_schema", "name": "out", "schema": SCHEMA, "description": None, "strict": False}
    assert _envelope(text={"format": {"type": "json_object"}})["text"]["format"] == {"type": "json_object"}


def test_tools_and_a_named_choice_are_echoed_in_full_shape():
    envelope = _envelope(tools=[{"type": "function", "name": "f"}],
                         tool_choice={"type": "function", "name": "f"})
    assert envelope["tools"] == [{"type": "function", "name": "f", "description": None, "parameters": None,
                                  "strict": False}]
    assert envelope["tool_choice"] == {"type": "function", "name": "f"}
    assert _envelope(tools=[{"type": "function", "name": "f"}], tool_choice="required")["tool_choice"] == "required"


def test_the_reasoning_effort_is_echoed():
    assert _envelope(reasoning={"effort": "low"})["reasoning"] == {"effort": "low", "summary": None}


def test_a_background_request_says_so():
    envelope = _envelope(background=True, store=True)
    assert envelope["background"] is True and envelope["store"] is True
