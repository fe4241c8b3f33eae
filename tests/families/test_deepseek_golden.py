"""Both DeepSeek families render byte for byte, control token for control token and id for id as DeepSeek's own
toolkit does (deepseek-recipe 0.2.0: `tests/families/deepseek_recipe_oracle.py`).

Checked on every conversation Maya's family tests know (`tests/families/conversations.py`, the start-up battery
`families/battery.py`, and `EXTRA` below) and on Chat Completions and Responses request bodies taken through
Maya's own request parsing and conversion. Where Maya writes something else on purpose, the departure is named in
`DEPARTURES` with its reason and checked to be exactly that.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

pytest.importorskip("deepseek_recipe", reason="DeepSeek's toolkit has no wheel for this platform")

from maya_server.chat.convert import to_conversation as chat_conversation
from maya_server.chat.request import parse_chat_request
from maya_server.chat.structured import parse_response_format
from maya_server.families import get_family
from maya_server.families.battery import BATTERY, PIXEL
from maya_server.neutral.conversation import Conversation, ImagePart, Message, TextPart, ToolResult
from maya_server.responses.conversion.convert import to_conversation as responses_conversation
from maya_server.responses.request.request import parse_responses_request

from tests.families import deepseek_recipe_oracle as oracle
from tests.families.conversations import CONVERSATIONS, TOOLS, assistant, call, result, system, user

FAMILIES = ("deepseek-v4.1", "deepseek-v4")

EXTRA: dict[str, Conversation] = {
    "effort_max": Conversation((system("Think."), user("Prove it.")), reasoning_effort="max"),
    "effort_minimal": Conversation((user("Quick."),), reasoning_effort="minimal"),
    "effort_medium": Conversation((user("Medium."),), reasoning_effort="medium"),
    "system_last": Conversation((user("Hi"), assistant("Hello", reasoning="greet"), system("Now in French."))),
    "systems_and_tools": Conversation((
        system("First."), user("Weather?"), assistant("", reasoning="call", calls=(call("c1", "get_weather", city="Oslo"),)),
        result("c1", "Snow"), system("Second, mid-way."), user("And now?"),
    ), tools=TOOLS),
    "developer_mid_chat_mode": Conversation((
        user("Hi"), assistant("Hello"), system("Be formal.", role="developer"), user("Bye"),
    ), reasoning_effort="none"),
    "parts_and_image_in_result": Conversation((
        user("Look."), assistant("", reasoning="look", calls=(call("c1", "get_weather", city="Rome"),)),
        ToolResult("c1", (TextPart("Sunny"), ImagePart(PIXEL), TextPart("see map"))),
    ), tools=TOOLS),
    "assistant_last_tools": Conversation((user("Hi"), assistant("Done.", reasoning="r")), tools=TOOLS),
    "empty_system": Conversation((system(""), user("Hi")), reasoning_effort="none"),
}

ALL = {**{f"tests:{k}": v for k, v in CONVERSATIONS.items()}, **{f"battery:{k}": v for k, v in BATTERY.items()},
       **{f"extra:{k}": v for k, v in EXTRA.items()}}

DEPARTURES: dict[tuple[str, str], str] = {
    ("deepseek-v4", "battery:image"): "image",
    ("deepseek-v4", "extra:parts_and_image_in_result"): "image",
    ("deepseek-v4.1", "battery:strict_tool"): "strict",
    ("deepseek-v4", "battery:strict_tool"): "strict",
}
"""Where Maya writes something else than the toolkit, on purpose:
- image: V4's encoder has no image syntax; the toolkit writes `[Unsupported Image]` as text. Maya writes V4's
  `<｜image｜>` token where the image is, so a vision path can put it there (an image the engine cannot take is
  refused before rendering), instead of dropping what the client sent.
- strict: the toolkit refuses strict and non-strict tools in one request, and re-serializes a strict tool's schema
  in its own key order; Maya serves the mix, and writes every schema as the client sent it (compared with the
  toolkit given the same tools without `strict`)."""


def _toolkit_view(family: str, name: str, conversation: Conversation) -> Conversation:
    """The conversation the toolkit is given: the departure's input, where one applies."""
    departure = DEPARTURES.get((family, name))
    if departure == "strict":
        return replace(conversation, tools=tuple(replace(t, strict=False) for t in conversation.tools))
    return conversation


def _expected_text(family: str, name: str, text: str) -> str:
    if DEPARTURES.get((family, name)) == "image" or (family == "deepseek-v4" and name == "image"):
        return text.replace("[Unsupported Image]", "<｜image｜>")
    return text


def _control_texts(prompt) -> list[str]:
    return [s.text for s in prompt.segments if s.control or s.media]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name", ALL)
def test_render_matches_deepseeks_toolkit(family, name):
    conversation = ALL[name]
    expected = oracle.render(_toolkit_view(family, name, conversation), family)
    prompt = get_family(family).render(conversation)
    assert prompt.text == _expected_text(family, name, expected.text)
    if family == "deepseek-v4.1" or "image" not in name:
        assert _control_texts(prompt) == [t for t in expected.special]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name", [n for n in ALL if "image" not in n])
def test_token_ids_match_deepseeks_toolkit(model_files, family, name):
    """With the model's tokenizer.json (V4's, and the V4.1-shaped one derived from it)."""
    conversation = ALL[name]
    expected = oracle.render(_toolkit_view(family, name, conversation), family)
    path = model_files.file(family)
    assert get_family(family).render(conversation).token_ids(model_files.ours(family)) == \
        oracle.oracle_ids(expected, family, str(path))


def test_v41_image_is_its_own_token_in_the_ids(model_files):
    prompt = get_family("deepseek-v4.1").render(BATTERY["image"])
    ids, media = prompt.tokenize(model_files.ours("deepseek-v4.1"))
    expected = oracle.oracle_ids(oracle.render(BATTERY["image"], "deepseek-v4.1"), "deepseek-v4.1",
                                 str(model_files.file("deepseek-v4.1")))
    with_images = list(ids)
    for offset, position in enumerate(media):
        with_images.insert(position + offset, 129264)
    assert with_images == expected


def test_the_comparison_covers_what_the_issue_names():
    """37 or more conversations, every effort, tools, images, a system message in the middle, developer."""
    assert len(ALL) >= 37
    efforts = {c.reasoning_effort for c in ALL.values()}
    assert efforts >= {None, "none", "minimal", "low", "medium", "high", "xhigh", "max"}


# Request bodies, through Maya's parsing and conversion and through the toolkit's.

WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
RESPONSES_WEATHER = {"type": "function", "name": "get_weather", "description": "Weather.",
                     "parameters": WEATHER_TOOL["function"]["parameters"]}


def _chat_call(call_id: str, city: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}


CHAT_BODIES: dict[str, dict] = {
    **{f"effort_{e}": {"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": e}
       for e in ("none", "minimal", "low", "medium", "high", "xhigh", "max")},
    "effort_unset": {"messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}]},
    "tools_results_out_of_order": {
        "messages": [
            {"role": "user", "content": "Oslo and Rome?"},
            {"role": "assistant", "content": "", "reasoning_content": "two", "tool_calls": [
                _chat_call("call_b", "Oslo"), _chat_call("call_a", "Rome")]},
            {"role": "tool", "tool_call_id": "call_a", "content": "Warm"},
            {"role": "tool", "tool_call_id": "call_b", "content": "Cold"},
        ],
        "tools": [WEATHER_TOOL],
    },
    "system_in_the_middle": {"messages": [
        {"role": "system", "content": "A"}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hey", "reasoning_content": "r"},
        {"role": "system", "content": "B"}, {"role": "user", "content": "Again"}]},
    "json_object": {"messages": [{"role": "user", "content": "Answer in json."}],
                    "response_format": {"type": "json_object"}},
    "json_schema_tools_system": {
        "messages": [{"role": "system", "content": "Be exact."}, {"role": "user", "content": "Weather as JSON?"}],
        "tools": [WEATHER_TOOL],
        "response_format": {"type": "json_schema", "json_schema": {
            "name": "weather", "description": "d", "strict": True, "schema": {
                "type": "object", "properties": {"city": {"type": "string"}, "é": {"type": "integer"}},
                "required": ["city", "é"], "additionalProperties": False}}}},
    "image_parts": {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is"}, {"type": "image_url", "image_url": {"url": PIXEL}},
        {"type": "text", "text": "this?"}]}]},
}

def _two_calls(oslo: str, rome: str) -> dict:
    """A Responses body with two calls (ids `oslo`, `rome`, made in that order) answered in the other order."""
    return {"tools": [RESPONSES_WEATHER], "input": [
        {"role": "user", "content": "Oslo and Rome?"},
        {"type": "function_call", "call_id": oslo, "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call", "call_id": rome, "name": "get_weather", "arguments": '{"city": "Rome"}'},
        {"type": "function_call_output", "call_id": rome, "output": "Warm"},
        {"type": "function_call_output", "call_id": oslo, "output": "Cold"},
    ]}


RESPONSES_BODIES: dict[str, dict] = {
    **{f"effort_{e}": {"input": "Hi", "reasoning": {"effort": e}}
       for e in ("none", "minimal", "low", "medium", "high", "xhigh", "max")},
    "instructions_and_developer": {"instructions": "Be brief.", "input": [
        {"role": "developer", "content": "Use metric units."}, {"role": "user", "content": "Weather?"}]},
    "calls_and_outputs_out_of_order": _two_calls("call_b", "call_a"),
    "json_schema": {"input": "Count to three.", "text": {"format": {
        "type": "json_schema", "name": "count", "schema": {
            "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
            "additionalProperties": False}, "strict": True}}},
    "calls_in_id_order": _two_calls("call_a", "call_b"),
    "image_input": {"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "What is"}, {"type": "input_image", "image_url": PIXEL}]}]},
    "system_in_the_middle": {"input": [
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hey"},
        {"role": "system", "content": "Now terse."}, {"role": "user", "content": "Again"}]},
}

REQUEST_DEPARTURES = {
    ("deepseek-v4", "responses", "instructions_and_developer"): (
        "V4's developer: the toolkit makes a Responses developer message a user turn (V4's agent-format role); Maya "
        "writes it as system text, as OpenAI clients mean it (`departures.py`: deepseek-v4 developer)"),
    ("deepseek-v4.1", "responses", "calls_and_outputs_out_of_order"): (
        "the toolkit's Responses conversion sorts a turn's function_call items by call_id (its Chat conversion keeps "
        "them as made); Maya keeps the order the calls were made in, in both APIs (V4's encoder sorts them by id "
        "anyway; with ids in the order made, `calls_in_id_order`, the prompts agree)"),
}


def _maya_conversation(api: str, body: dict) -> Conversation:
    if api == "chat":
        request, messages = parse_chat_request({**body, "model": "m"})
        return chat_conversation(request, messages, output_format=parse_response_format(body.get("response_format")))
    return responses_conversation(parse_responses_request({**body, "model": "m"}))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("api, name", [("chat", n) for n in CHAT_BODIES] + [("responses", n) for n in RESPONSES_BODIES])
def test_request_bodies_render_as_the_toolkit_converts_them(family, api, name):
    body = (CHAT_BODIES if api == "chat" else RESPONSES_BODIES)[name]
    if (family, api, name) in REQUEST_DEPARTURES:
        pytest.skip(REQUEST_DEPARTURES[(family, api, name)])
    expected = oracle.render_body(body, family, api)
    prompt = get_family(family).render(_maya_conversation(api, body))
    assert prompt.text == _expected_text(family, "image" if "image" in name else name, expected.text)


def test_v4_developer_departure_is_exactly_system_text():
    body = RESPONSES_BODIES["instructions_and_developer"]
    as_system = {**body, "input": [{"role": "system", "content": "Use metric units."}, body["input"][1]]}
    expected = oracle.render_body(as_system, "deepseek-v4", "responses")
    assert get_family("deepseek-v4").render(_maya_conversation("responses", body)).text == expected.text


# What each effort becomes, the table in docs/models.md.

EFFORT_TABLE = {
    "deepseek-v4.1": {"none": None, "minimal": "50", "low": "50", None: "75", "medium": "75", "high": "75",
                      "xhigh": "75", "max": "100"},
    "deepseek-v4": {"none": None, "minimal": "", "low": "", None: "Absolute maximum", "medium": "Absolute maximum",
                    "high": "Absolute maximum", "xhigh": "Absolute maximum", "max": "Beyond maximum"},
}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("effort", ["none", "minimal", "low", None, "medium", "high", "xhigh", "max"])
def test_effort_table(family, effort):
    text = get_family(family).render(Conversation((user("Hi"),), reasoning_effort=effort)).text
    expected = EFFORT_TABLE[family][effort]
    assert text.endswith("</think>" if expected is None else "<think>")
    if expected is None:
        assert "Reasoning Effort" not in text
    elif family == "deepseek-v4.1":
        assert f"Reasoning Effort: {expected} (range 1-100" in text
    elif expected:
        assert f"Reasoning Effort: {expected}" in text
    else:
        assert "Reasoning Effort" not in text
