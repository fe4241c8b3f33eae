"""The start-up conformance check (maya_server/families/conformance.py) against the kept official templates."""

from __future__ import annotations

from pathlib import Path

import pytest

from maya_server.families import get_family
from maya_server.families.battery import BATTERY
from maya_server.families.conformance import DEPARTURES, check_template

TEMPLATES = Path(__file__).parent / "templates"
OFFICIAL = {"glm-4.7-flash": "glm-4.7", "glm-5": "glm-4.7", "glm-5.1": "glm-5.1", "glm-5.2": "glm-5.2",
            "glm-5.3-flash": "glm-5.3"}


def check(model_files, template: str, family: str, tokenizer: str = "glm-4.7-flash"):
    return check_template(family, get_family(family), template, model_files.ours(tokenizer))


@pytest.mark.parametrize("model", OFFICIAL)
def test_every_official_template_matches_the_family_detected_from_it(model_files, model):
    report = check(model_files, (TEMPLATES / f"{model}.jinja").read_text(), OFFICIAL[model])
    assert report.result == "match" and report.conversations == len(BATTERY) and not report.failed


def test_glm53_served_as_glm52_is_caught_in_each_way_it_differs(model_files):
    report = check(model_files, (TEMPLATES / "glm-5.3-flash.jinja").read_text(), "glm-5.2")
    assert report.result == "mismatch" and report.failed
    differing = {m.conversation: m for m in report.mismatches}
    # results sorted into call order; earlier reasoning replayed; `none` still thinks
    assert {"results_out_of_order", "reasoning_history", "effort_none"} <= set(differing)
    assert (differing["effort_none"].ours, differing["effort_none"].template) == ("<|user|>", "<|system|>")
    assert "glm-5.2 renderer" in report.message()
    status = report.status()
    assert status["result"] == "mismatch" and status["family"] == "glm-5.2"
    assert {"conversation", "token_index", "maya", "template"} == set(status["mismatches"][0])


def test_the_glm52_effort_departure_is_listed(model_files):
    report = check(model_files, (TEMPLATES / "glm-5.2.jinja").read_text(), "glm-5.2")
    assert report.status()["departures"] == ["glm developer", "glm-5.2 effort"] and "glm-5.2 effort" in DEPARTURES


def test_each_glm53_departure_is_seen_by_the_check(model_files):
    """GLM-5.3's template drops a developer message and writes Max for `none`, `minimal` and `medium`: each is a
    listed departure, seen where the check hands the template the client's own values."""
    report = check(model_files, (TEMPLATES / "glm-5.3-flash.jinja").read_text(), "glm-5.3")
    assert report.result == "match"
    assert report.status()["departures"] == ["glm developer", "glm-5.3 effort none", "glm-5.3 effort minimal",
                                             "glm-5.3 effort medium"]
    assert all(DEPARTURES[name].reason for name in report.departures)


def edited(model: str, old: str, new: str) -> str:
    """The kept official template with one change a future release could make."""
    text = (TEMPLATES / f"{model}.jinja").read_text()
    assert text.count(old) == 1, old
    return text.replace(old, new)


CHANGED = {
    "image tokens": ("glm-5.3-flash", "glm-5.3", "<|begin_of_image|><|image|><|end_of_image|>",
                     "<|begin_of_image|><|image|><|image|><|end_of_image|>", "image"),
    "content parts joined by lines": ("glm-5.1", "glm-5.1", "{{- item.text }}", "{{- item.text + '\\n' }}",
                                      "content_parts"),
    "strict rendered": ("glm-5.2", "glm-5.2", "and k != 'strict'", "", "strict_tool"),
    "two results not sorted": ("glm-5.3-flash", "glm-5.3", "{%- if ns_chk.can_sort -%}",
                               "{%- if ns_chk.can_sort and ns_a.tool_calls | length != 2 -%}", "two_calls_twice"),
    "none understood": ("glm-5.3-flash", "glm-5.3", "reasoning_effort in ['low', 'high']",
                        "reasoning_effort in ['none', 'low', 'high']", "effort_none"),
    "developer as user": ("glm-5.3-flash", "glm-5.3", "{%- elif m.role == 'system' -%}",
                          "{%- elif m.role == 'developer' -%}<|user|>{{ visible_text(m.content) }}\n"
                          "{%- elif m.role == 'system' -%}", "developer"),
}


@pytest.mark.parametrize("change", CHANGED)
def test_a_template_that_changes_what_the_battery_reaches_is_a_mismatch(model_files, change):
    """Images, content parts, a tool's `strict`, the sorting of two results, what the template does with the
    client's own `none` and with a developer message: a template release that changes one is found."""
    model, family, old, new, conversation = CHANGED[change]
    report = check(model_files, edited(model, old, new), family)
    assert report.result == "mismatch", report.status()
    assert conversation in {m.conversation for m in report.mismatches}


def test_nothing_to_compare_is_said(model_files):
    assert check(model_files, None, "glm-5.1").result == "skipped"
    chatml = check(model_files, "{{ messages }}", "chatml")
    assert chatml.result == "skipped" and "SmolLM2" in chatml.detail and not chatml.failed


def test_a_template_that_cannot_render_is_an_error(model_files):
    broken = check(model_files, "{% for m in messages %}", "glm-5.1")
    assert broken.result == "error" and broken.failed and "does not compile" in broken.detail
    refusing = check(model_files, "{{ raise_exception('no tools here') }}", "glm-5.1")
    assert refusing.result == "error" and "no tools here" in refusing.detail


@pytest.mark.slow
def test_llama_cpps_deepseek_v4_template_differs_only_where_listed(model_files):
    from tests.family_models import family_chat_template

    report = check(model_files, family_chat_template("deepseek-v4"), "deepseek-v4", tokenizer="deepseek-v4")
    assert report.result == "match" and report.conversations == len(BATTERY) - 13, report.status()
    assert "llama.cpp's deepseek-ai-DeepSeek-V4.jinja" in report.status()["departures"][-1]
