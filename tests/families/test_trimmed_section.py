"""`TrimmedSection`: a reasoning or answer section streamed without its edge whitespace.

Pins: leading whitespace is dropped, trailing whitespace is held until later text proves it inner,
`started` turns true only with non-whitespace text, `end()` drops what is held and lets a new
section begin, and however the text is split, what is released is exactly `text.strip()`.
"""

from __future__ import annotations

import pytest

from maya_server.families.trimmed_section import TrimmedSection


def released(pieces) -> str:
    section = TrimmedSection()
    return "".join(section.push(piece) for piece in pieces)


def test_leading_whitespace_is_dropped_and_started_waits_for_text():
    section = TrimmedSection()
    assert section.push("\n\n  ") == "" and not section.started
    assert section.push(" \tHello") == "Hello" and section.started


def test_trailing_whitespace_is_held_until_more_text_arrives():
    section = TrimmedSection()
    assert section.push("Hello \n") == "Hello"
    assert section.push("\n") == ""
    assert section.push("  ") == ""
    assert section.push("world\n") == " \n\n  world"


def test_inner_whitespace_within_one_piece_is_kept():
    assert TrimmedSection().push("  a  b\n\nc  ") == "a  b\n\nc"


def test_end_drops_held_whitespace_and_starts_over():
    section = TrimmedSection()
    section.push("thought\n\n")
    section.end()
    assert not section.started
    assert section.push("\n\nanswer") == "answer"  # neither the old tail nor the new head leaks


def test_unicode_whitespace_counts_as_whitespace():
    assert released(["\u3000\u00a0答え", "\u2003", "です\u3000"]) == "答え\u2003です"


TEXT = "\n\n  First line ✓\n\n  second 😀 line \t\n\n"


@pytest.mark.parametrize("cut", range(len(TEXT) + 1))
def test_every_two_way_split_releases_exactly_the_stripped_text(cut):
    assert released([TEXT[:cut], TEXT[cut:]]) == TEXT.strip()


def test_one_character_at_a_time_releases_exactly_the_stripped_text():
    assert released(list(TEXT)) == TEXT.strip()
    assert released(list(" \n \n ")) == ""
