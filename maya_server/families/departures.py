"""Where Maya's family renderers deliberately write something other than the model's own chat template.

The start-up check (`conformance.py`) hands the template what the client sent. Each departure here names the
families it applies to, the battery conversations it shows in, why Maya writes what it writes, and two changes
of the template's inputs: what the template is known to do with the client's value (`template_does`: Max for an
effort it does not know, nothing for a developer message) and what Maya decided instead (`decide`). Where a
listed conversation differs, the check holds the template to both: the template must still do what is recorded
(a template that starts to understand `none` is a finding, not a departure), and Maya's prompt must match the
template given Maya's decision (so the rest of that prompt is still checked). Then the departure is reported as
seen. Each is named once, here; `glm.py` explains the choices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..neutral.conversation import Conversation
from .glm import EFFORT_53

GLM = ("glm", "glm-4.7", "glm-5", "glm-5.1", "glm-5.2", "glm-5.3")
"""The GLM family's registry names (`families.get_family`)."""
GLM_V_IMAGE = "<|begin_of_image|><|image|><|end_of_image|>"

Inputs = dict
"""What a template is rendered with: `messages`, `tools` and its keyword arguments (`reasoning_effort`…)."""


@dataclass(frozen=True)
class Departure:
    """One deliberate difference: where it applies, why, and how the template's inputs say it (module docstring)."""

    families: tuple[str, ...]
    conversations: tuple[str, ...]
    """The battery conversations (`battery.BATTERY`) it shows in."""
    reason: str
    template_does: Callable[[Inputs, Conversation], Inputs]
    """The template's inputs changed to say what the template is known to do with the client's."""
    decide: Callable[[Inputs, Conversation], Inputs]
    """The template's inputs changed to what Maya decided."""


def _as_given(inputs: Inputs, conversation: Conversation) -> Inputs:
    return inputs


def _without_developer(inputs: Inputs, conversation: Conversation) -> Inputs:
    return {**inputs, "messages": [m for m in inputs["messages"] if m["role"] != "developer"]}


def _developer_as_system(inputs: Inputs, conversation: Conversation) -> Inputs:
    messages = [{**m, "role": "system"} if m["role"] == "developer" else m for m in inputs["messages"]]
    return {**inputs, "messages": messages}


def _images(replacement: dict | None) -> Callable[[Inputs, Conversation], Inputs]:
    """Each image part replaced by `replacement` (None: left out)."""

    def change(inputs: Inputs, conversation: Conversation) -> Inputs:
        def parts(content: list) -> list:
            return [p if p.get("type") not in ("image", "image_url") else replacement
                    for p in content if replacement is not None or p.get("type") not in ("image", "image_url")]

        messages = [{**m, "content": parts(m["content"])} if isinstance(m["content"], list) else m
                    for m in inputs["messages"]]
        return {**inputs, "messages": messages}

    return change


def _without_strict(inputs: Inputs, conversation: Conversation) -> Inputs:
    tools = inputs["tools"] and [{**t, "function": {k: v for k, v in t["function"].items() if k != "strict"}}
                                 for t in inputs["tools"]]
    return {**inputs, "tools": tools}


def _effort(levels: dict[str, str]) -> Callable[[Inputs, Conversation], Inputs]:
    """The template's `reasoning_effort` as `levels` maps the client's (efforts not in it as given): the level
    Maya writes, or the one the template is known to write."""

    def change(inputs: Inputs, conversation: Conversation) -> Inputs:
        effort = conversation.reasoning_effort
        return {**inputs, "reasoning_effort": levels[effort]} if effort in levels else inputs

    return change


DEPARTURES: dict[str, Departure] = {
    "glm developer": Departure(GLM, ("developer",), (
        "GLM's templates know no developer role and drop the message; Maya writes it as a system message, since "
        "OpenAI clients (Codex, the Responses API's instructions) put their instructions there, and dropping them "
        "silently would change what the model is asked"),
        _without_developer, _developer_as_system),
    "deepseek-v4 developer": Departure(("deepseek-v4",), ("developer",), (
        "a developer message is written as system text, as OpenAI clients mean it; DeepSeek's encoder (and "
        "llama.cpp's template after it) makes it a user turn, its internal agent format's developer role"),
        _as_given, _developer_as_system),
    "glm images": Departure(("glm", "glm-4.7", "glm-5", "glm-5.1"), ("image",), (
        "the text-only GLM templates (4.7, 5, 5.1) drop an image part; Maya writes GLM-V's "
        "`<|begin_of_image|><|image|><|end_of_image|>`, where a model served with its mmproj sees the image (without "
        "one, an image is refused before rendering)"),
        _images(None), _images({"type": "text", "text": GLM_V_IMAGE})),
    "glm-4.7 strict": Departure(("glm-4.7", "glm-5"), ("strict_tool",), (
        "GLM-4.7's template lists whole tool objects, a `strict` flag included; Maya leaves it out, as the later "
        "templates do: it tells the server to hold the arguments to the schema (Maya does), not the model"),
        _as_given, _without_strict),
    "glm-5.2 effort": Departure(("glm-5.2",), ("effort_minimal", "effort_low", "effort_medium"), (
        "efforts minimal/low/medium/high are written as `Reasoning Effort: High`; the template writes High only for "
        "`high` and Max for anything else. A client asking for less thinking gets the least the model knows, not "
        "the most"),
        _effort(dict.fromkeys(("minimal", "low", "medium"), "max")),
        _effort(dict.fromkeys(("minimal", "low", "medium"), "high"))),
    "glm-5.3 effort none": Departure(("glm-5.3",), ("effort_none",), (
        "GLM-5.3 cannot stop thinking: `none` is written as `Low`, its lowest level (the template writes Max for "
        "it), and the reasoning still comes back as reasoning"),
        _effort({"none": "max"}), _effort({"none": EFFORT_53["none"].lower()})),
    "glm-5.3 effort minimal": Departure(("glm-5.3",), ("effort_minimal",), (
        "`minimal` is written as `Low`, the template's lowest level; the template knows only low and high and "
        "writes Max for anything else: a client asking for the least thinking should not get the most"),
        _effort({"minimal": "max"}), _effort({"minimal": EFFORT_53["minimal"].lower()})),
    "glm-5.3 effort medium": Departure(("glm-5.3",), ("effort_medium",), (
        "`medium` is written as `High`, the level between Low and Max; the template writes Max for it: a client "
        "asking for medium thinking should not get the most"),
        _effort({"medium": "max"}), _effort({"medium": EFFORT_53["medium"].lower()})),
}
"""Known, deliberate differences from the raw template, each with its reason: named once, here."""


def departures_of(family_name: str, conversation: str | None = None) -> tuple[str, ...]:
    """The departures `family_name` makes: in the battery conversation `conversation`, or (None) in any."""
    return tuple(name for name, d in DEPARTURES.items()
                 if family_name in d.families and (conversation is None or conversation in d.conversations))


def applied(inputs: Inputs, conversation: Conversation, names: tuple[str, ...], *, decided: bool = True) -> Inputs:
    """The template's inputs with the departures `names` applied: what Maya decided for `conversation`, or
    (`decided=False`) what the template is known to do with the client's."""
    for name in names:
        departure = DEPARTURES[name]
        inputs = (departure.decide if decided else departure.template_does)(inputs, conversation)
    return inputs
