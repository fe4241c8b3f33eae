"""Start-up check: does Maya's family renderer write the prompt the model's own chat template writes?

Maya renders prompts with its own code (`glm.py`, `deepseek_prompt.py`), exact by
construction for the template releases it knows. A new release (GLM-5.3 was
detected as 5.2 and differed in four ways) would otherwise go unnoticed, so at
start-up, when the engine reports a chat template, every conversation of
`battery.BATTERY` is rendered both ways: by the family, and by the template
itself in a sandboxed Jinja environment set up as transformers'
`apply_chat_template` sets it up (trim_blocks, lstrip_blocks, loop controls,
its `tojson`, `raise_exception` and `strftime_now`). Both are tokenized by the
engine's tokenizer and the ids compared. A difference is reported with the
conversation, the first differing token and the family variant chosen
(`TemplateCheck`); `--template-check` decides whether that warns (default),
stops start-up, or is not looked at.

The template receives what the client sent: its messages (a developer message as
a developer message, content parts and images as parts, a tool's `strict`) and
its reasoning effort in the template's own terms (`template_kwargs`). Where Maya
deliberately writes something else, the departure is listed once in
`departures.DEPARTURES` with its reason and the conversations it shows in; for
those, the template is rendered again with what Maya decided, which must then
match (the rest of the prompt is still checked), and the departure is reported
as seen. A listed departure that no longer differs is simply a match.

Images: a media segment in Maya's prompt has no ids of its own (the engine puts
the image there), so it is compared as the family's image token.

jinja2 rather than llama-server's own template engine is the reference: that
engine replays earlier turns' reasoning where jinja2 does not (GLM-5.2), and
Maya renders prompts itself, as transformers and vLLM render them, so that quirk
never reaches a model served by Maya.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..model.tokenizer import Prompt, Tokenizer
from ..neutral.conversation import Conversation
from .base import Family
from .battery import BATTERY, template_messages, template_tools
from .departures import DEPARTURES, applied, departures_of
from .history import thinking_enabled

KNOWN_TEMPLATES: dict[str, tuple[str, dict[str, str]]] = {
    "7bd4fbdf0c06cd7398ddb6913de6e4a5839b9d06569e74e5b2ec246b375ca9c9": (
        "llama.cpp's deepseek-ai-DeepSeek-V4.jinja (0.3.36)",
        {**dict.fromkeys(("tool_call_and_result", "results_out_of_order", "two_calls_twice", "strict_tool",
                          "effort_xhigh", "system", "tools", "developer", "reasoning_history", "effort_medium",
                          "effort_high"),
                         "DeepSeek ships V4's prompt format as code (its encoder, and the deepseek-recipe toolkit), "
                         "no template; GGUFs carry llama.cpp's own, which differs from DeepSeek's (no blank line "
                         "before the tools when there is no system message, no `Reasoning Effort: Absolute maximum` "
                         "paragraph, which DeepSeek's toolkit writes for every thinking effort but minimal and low, "
                         "calls in the order made where the toolkit sorts them by id). Maya follows DeepSeek's "
                         "toolkit, which its golden tests check"),
         **dict.fromkeys(("content_parts", "image"),
                         "llama.cpp's template reads a message's content only as a string (llama-server joins the "
                         "parts before rendering), and V4's text encoder has no image syntax")},
    ),
}
"""Templates that are not the release's own, by sha256: their name and the battery conversations in which they
are known to differ from the official prompt, with why. Those conversations are not compared."""

SKIPPED: dict[str, str] = {
    "deepseek-v4.1": "DeepSeek-V4.1 ships no chat template, only its encoder: its reference is DeepSeek's toolkit, "
                     "which the golden tests check, not whatever template an engine reports for it",
    "chatml": "ChatML is one renderer for many models (SmolLM2, Qwen2.5, Qwen3), each template with its own default "
              "system line, so no one template is its reference",
}
"""Families not checked, and why."""


def _glm_kwargs(conversation: Conversation, variant: str) -> dict:
    effort = conversation.reasoning_effort
    if variant == "glm-5.3":  # it has no off switch: `none` is handed over as the client sent it
        return {} if effort is None else {"reasoning_effort": effort}
    kwargs: dict = {} if thinking_enabled(conversation) else {"enable_thinking": False}
    if variant == "glm-5.2" and effort not in (None, "none"):
        kwargs["reasoning_effort"] = effort
    return kwargs


def template_kwargs(family_name: str, conversation: Conversation) -> dict:
    """What a template is given beside messages and tools for `conversation`: the client's reasoning effort in the
    template's terms (`none` as the off switch where the template has one)."""
    if family_name.startswith("glm"):
        return _glm_kwargs(conversation, family_name)
    if family_name == "deepseek-v4":
        return {"thinking": thinking_enabled(conversation), "reasoning_effort": conversation.reasoning_effort,
                "bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}
    return {}


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: str):
    raise jinja2.exceptions.TemplateError(message)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def compile_template(template: str) -> jinja2.Template:
    """The chat template, compiled once in a fresh sandboxed environment set up as transformers sets it up."""
    return _environment().from_string(template)


def render_with_template(compiled: jinja2.Template, family_name: str, conversation: Conversation,
                         departures: tuple[str, ...] = (), *, decided: bool = True) -> str:
    """The prompt text the chat template writes for `conversation` (a generation prompt included): as the client
    sent it, or with the `departures` (names in `DEPARTURES`) applied: as Maya decided it, or (`decided=False`)
    as the template is known to treat the client's values."""
    inputs = {"messages": template_messages(conversation), "tools": template_tools(conversation),
              **template_kwargs(family_name, conversation)}
    inputs = applied(inputs, conversation, departures, decided=decided)
    return compiled.render(add_generation_prompt=True, **{"bos_token": "", "eos_token": "", **inputs})


def prompt_ids(prompt: Prompt, tokenizer: Tokenizer) -> list[int]:
    """The prompt's ids with each image's place filled by the family's image token, as a template writes it."""
    ids, places = prompt.tokenize(tokenizer)
    tokens = [tokenizer.encode(segment.text, special=True) for segment in prompt.segments if segment.media]
    for place, token in reversed(list(zip(places, tokens))):
        ids[place:place] = token
    return ids


@dataclass(frozen=True)
class Mismatch:
    conversation: str
    index: int
    ours: str | None
    """The token Maya writes at `index` (None: Maya's prompt ends there)."""
    template: str | None

    def describe(self) -> str:
        return f"{self.conversation}: token {self.index} is {self.ours!r} in Maya's prompt, {self.template!r} in the template's"


@dataclass(frozen=True)
class TemplateCheck:
    """What the check found: `result` is match, mismatch, error (the template could not be rendered), skipped or off."""

    result: str
    family: str
    conversations: int = 0
    mismatches: tuple[Mismatch, ...] = ()
    detail: str = ""
    elapsed_ms: float = 0.0
    departures: tuple[str, ...] = field(default=())

    @property
    def failed(self) -> bool:
        return self.result in ("mismatch", "error")

    def message(self) -> str:
        """One line for the log: what differs, or why nothing was compared."""
        if self.result == "match":
            return f"the {self.family} renderer matches the model's chat template ({self.conversations} conversations)"
        if self.result == "mismatch":
            first = "; ".join(m.describe() for m in self.mismatches[:3])
            return (f"the model's chat template renders {len(self.mismatches)} of {self.conversations} conversations "
                    f"differently from the {self.family} renderer Maya chose: {first}. The model may see prompts it "
                    "was not trained on: pick the right variant with --family, or report the template")
        return f"chat template not checked against the {self.family} renderer: {self.detail}"

    def status(self) -> dict:
        """The section of /v1/status."""
        body: dict = {"result": self.result, "family": self.family, "conversations": self.conversations,
                      "elapsed_ms": round(self.elapsed_ms, 1)}
        if self.mismatches:
            body["mismatches"] = [{"conversation": m.conversation, "token_index": m.index, "maya": m.ours,
                                   "template": m.template} for m in self.mismatches]
        if self.detail:
            body["detail"] = self.detail
        if self.departures:
            body["departures"] = list(self.departures)
        return body


def check_template(
    family_name: str,
    family: Family,
    template: str | None,
    tokenizer: Tokenizer,
    *,
    clock: Callable[[], float] = time.perf_counter,
) -> TemplateCheck:
    """Render `BATTERY` with `family` and with `template`, tokenize both with `tokenizer`, compare the ids."""
    if not template:
        return TemplateCheck("skipped", family_name, detail="the model carries no chat template")
    base = family_name.split("-")[0]
    if base in SKIPPED or family_name in SKIPPED:
        return TemplateCheck("skipped", family_name, detail=SKIPPED.get(family_name) or SKIPPED[base])
    started = clock()
    departures: tuple[str, ...] = ()
    known, expected_differences = KNOWN_TEMPLATES.get(hashlib.sha256(template.encode()).hexdigest(), ("", {}))
    notes = (f"{known}: {', '.join(expected_differences)} not compared",) if known else ()
    mismatches = []
    try:
        compiled = compile_template(template)
    except jinja2.exceptions.TemplateError as exc:
        return TemplateCheck("error", family_name, detail=f"the template does not compile: {exc}",
                             elapsed_ms=(clock() - started) * 1000, departures=notes)
    compared = {name: c for name, c in BATTERY.items() if name not in expected_differences}
    for name, conversation in compared.items():
        listed = departures_of(family_name, name)
        try:
            ours = prompt_ids(family.render(conversation), tokenizer)
            expected = tokenizer.encode(render_with_template(compiled, family_name, conversation), special=True)
            if ours != expected and listed and _departs_as_listed(compiled, family_name, conversation, listed,
                                                                  ours, expected, tokenizer):
                departures += tuple(d for d in listed if d not in departures)
                continue
        except Exception as exc:  # a template can fail in many ways (syntax, raise_exception, sandbox): report it
            return TemplateCheck("error", family_name, len(compared), detail=f"{name}: {type(exc).__name__}: {exc}",
                                 elapsed_ms=(clock() - started) * 1000, departures=departures + notes)
        if ours != expected:
            mismatches.append(_first_difference(name, ours, expected, tokenizer))
    result = "mismatch" if mismatches else "match"
    return TemplateCheck(result, family_name, len(compared), tuple(mismatches),
                         elapsed_ms=(clock() - started) * 1000, departures=departures + notes)


def _departs_as_listed(compiled: jinja2.Template, family_name: str, conversation: Conversation,
                       listed: tuple[str, ...], ours: list[int], expected: list[int], tokenizer: Tokenizer) -> bool:
    """Whether the template treats the client's values as the departures record (`expected` is its prompt for
    them) and Maya's prompt is the template's given what Maya decided."""
    def ids(decided: bool) -> list[int]:
        text = render_with_template(compiled, family_name, conversation, listed, decided=decided)
        return tokenizer.encode(text, special=True)

    return expected == ids(decided=False) and ours == ids(decided=True)


def _first_difference(name: str, ours: list[int], expected: list[int], tokenizer: Tokenizer) -> Mismatch:
    index = next((i for i, (a, b) in enumerate(zip(ours, expected)) if a != b), min(len(ours), len(expected)))

    def piece(ids: list[int]) -> str | None:
        return tokenizer.decode([ids[index]]) if index < len(ids) else None

    return Mismatch(name, index, piece(ours), piece(expected))
