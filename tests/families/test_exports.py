"""The families package's exported members: what `__all__` promises exists, and every configured name builds.

Why: `--family` values, `FAMILY_NAMES` and the registry must agree, or a name the CLI accepts fails at start-up.
"""
from __future__ import annotations

import maya_server.families as families


def test_every_exported_name_exists_and_the_list_is_sorted():
    assert all(hasattr(families, name) for name in families.__all__)
    assert list(families.__all__) == sorted(families.__all__, key=str.lower)


def test_every_family_name_builds_a_family_that_can_render():
    for name in families.FAMILY_NAMES:
        family = families.get_family(name)
        assert family.stop_texts, name
        assert callable(family.render) and callable(family.parser)


def test_an_unknown_name_lists_the_valid_ones():
    try:
        families.get_family("llama")
    except ValueError as exc:
        assert "chatml" in str(exc) and "glm" in str(exc)
    else:
        raise AssertionError("an unknown family name was accepted")
