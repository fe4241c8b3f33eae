"""Which families have DeepSeek's `max` tier: every DeepSeek family by its name, no other; the refusal names the
param it is given and the efforts the family does take."""

from __future__ import annotations

from types import SimpleNamespace
from typing import get_args

import pytest

from maya_server.errors import InvalidRequestError
from maya_server.families import FAMILY_NAMES, get_family
from maya_server.families.effort_tiers import COMMON, check_effort
from maya_server.neutral.conversation import ReasoningEffort


@pytest.mark.parametrize("name", FAMILY_NAMES)
@pytest.mark.parametrize("effort", (None, *COMMON))
def test_openai_efforts_pass_for_every_family(name, effort):
    check_effort(get_family(name), effort, "reasoning_effort")


@pytest.mark.parametrize("name", [n for n in FAMILY_NAMES if n.startswith("deepseek")] + ["deepseek-v4.1"])
def test_max_passes_for_deepseek_families(name):
    """`deepseek-v4.1` by name alone: a DeepSeek family added later has the tier without being listed."""
    check_effort(SimpleNamespace(name=name), "max", "reasoning.effort")


@pytest.mark.parametrize("name", [n for n in FAMILY_NAMES if not n.startswith("deepseek")])
def test_max_is_refused_elsewhere(name):
    with pytest.raises(InvalidRequestError) as caught:
        check_effort(get_family(name), "max", "reasoning.effort")
    error = caught.value.body()["error"]
    assert (caught.value.status, error["param"], error["code"]) == (400, "reasoning.effort", "unsupported_value")
    assert "DeepSeek's own tier" in error["message"] and "'xhigh'" in error["message"]


def test_max_is_the_only_effort_beyond_openai_s_common_ones():
    assert set(get_args(ReasoningEffort)) - set(COMMON) == {"max"}
