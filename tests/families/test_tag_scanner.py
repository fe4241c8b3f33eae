"""`TagScanner`: tags found in model output however the engine split it.

Pins the docstring's example, the earliest-tag and longer-tag-at-a-tie rules, that only a possible
partial tag is held back (everything else is released at once), `drain` for a tag that never
completes, and that every split of a text, down to one character at a time, yields the same text
and tags as the whole text (unicode included).
"""

from __future__ import annotations

import pytest

from maya_server.families.tag_scanner import TagScanner

THINK = ("<think>", "</think>")


def scan(pieces, tags=THINK) -> list[tuple[str, str]]:
    """The scanner's output as ("text", …) / ("tag", …) events, adjacent text merged, drain included."""
    scanner, events = TagScanner(), []

    def emit(kind, value):
        if kind == "text" and events and events[-1][0] == "text":
            events[-1] = ("text", events[-1][1] + value)
        elif value:
            events.append((kind, value))

    for piece in pieces:
        scanner.push(piece)
        while True:
            text, tag = scanner.next(tags)
            emit("text", text)
            if tag is None:
                break
            emit("tag", tag)
    emit("text", scanner.drain())
    return events


def test_the_docstring_example():
    scanner = TagScanner()
    scanner.push("Hello </th")
    assert scanner.next(("</think>",)) == ("Hello ", None)
    scanner.push("ink>rest")
    assert scanner.next(("</think>",)) == ("", "</think>")
    assert scanner.next(("</think>",)) == ("rest", None)


def test_text_without_a_tags_first_character_is_released_whole():
    scanner = TagScanner()
    scanner.push("plain text, no angle brackets ✓")
    assert scanner.next(THINK) == ("plain text, no angle brackets ✓", None)
    assert scanner.drain() == ""


def test_only_the_possible_partial_tag_is_held():
    scanner = TagScanner()
    scanner.push("a < b <thi")
    assert scanner.next(THINK) == ("a < b ", None)
    assert scanner.drain() == "<thi"
    scanner.push("x<ab<a")
    assert scanner.next(("<abc>",)) == ("x<ab", None)  # "<ab<a" cannot grow into the tag; "<a" can


def test_the_earliest_tag_comes_first_and_the_longer_wins_a_tie():
    scanner = TagScanner()
    scanner.push("1</think>2<think>3")
    assert scanner.next(THINK) == ("1", "</think>")
    assert scanner.next(THINK) == ("2", "<think>")
    scanner = TagScanner()
    scanner.push("x<call>!y")
    assert scanner.next(("<call>", "<call>!")) == ("x", "<call>!")


def test_a_partial_tag_that_never_completes_is_drained_as_text():
    assert scan(["answer </thi"]) == [("text", "answer </thi")]


def test_no_tags_releases_everything():
    scanner = TagScanner()
    scanner.push("<think>")
    assert scanner.next(()) == ("<think>", None)


TEXT = "<think>ünï ✓ <th\nthought</think>😀 answer </think"
WHOLE = [("tag", "<think>"), ("text", "ünï ✓ <th\nthought"), ("tag", "</think>"), ("text", "😀 answer </think")]


def test_the_whole_text_at_once():
    assert scan([TEXT]) == WHOLE


@pytest.mark.parametrize("cut", range(1, len(TEXT)))
def test_every_two_way_split_gives_the_same_events(cut):
    assert scan([TEXT[:cut], TEXT[cut:]]) == WHOLE


def test_one_character_at_a_time_gives_the_same_events():
    assert scan(list(TEXT)) == WHOLE
