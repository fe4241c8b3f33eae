"""`StopStringMatcher`: stop strings over streamed text, whatever the split.

It publishes everything that cannot still become a stop string, holds back only a possible partial
match, and never publishes the matched stop string or what follows it. Feeding the same text in
every possible split must publish the same result as feeding it whole.
"""

from __future__ import annotations

import pytest

from maya_server.pipeline.stop_strings import StopStringMatcher


def run(stops, pieces) -> tuple[str, bool]:
    matcher = StopStringMatcher(tuple(stops))
    out = []
    for piece in pieces:
        out.append(matcher.feed(piece))
        if matcher.matched:
            return "".join(out), True
    return "".join(out) + matcher.flush(), False


def test_without_stops_text_passes_through_unheld():
    matcher = StopStringMatcher(("",))  # an empty stop string is ignored, not a match everywhere
    assert matcher.feed("abc") == "abc" and matcher.flush() == "" and not matcher.matched


def test_the_stop_string_and_what_follows_are_never_published():
    matcher = StopStringMatcher(("END",))
    assert matcher.feed("done END and more") == "done "
    assert matcher.matched


def test_only_a_possible_partial_match_is_held():
    matcher = StopStringMatcher(("</stop>",))
    assert matcher.feed("hello </st") == "hello "
    assert matcher.feed("ay>") == "</stay>"  # the held prefix turned out not to be the stop string
    assert matcher.feed("x <") == "x "
    assert matcher.flush() == "<" and not matcher.matched
    assert matcher.flush() == ""


def test_the_earliest_stop_wins_among_several():
    assert run(("bb", "a"), ["xxbba"]) == ("xx", True)
    assert run(("abc", "b"), ["zab"]) == ("za", True)


TEXT = "Ünïcode ✓ then STOP😀 after"


@pytest.mark.parametrize("cut", range(len(TEXT) + 1))
def test_every_two_way_split_gives_the_whole_texts_result(cut):
    assert run(("STOP😀",), [TEXT[:cut], TEXT[cut:]]) == ("Ünïcode ✓ then ", True)


def test_character_by_character_matches_and_misses_like_whole_text():
    assert run(("STOP😀",), list(TEXT)) == ("Ünïcode ✓ then ", True)
    near_miss = "STOSTOP STOP😁 end"
    assert run(("STOP😀",), list(near_miss)) == (near_miss, False)


def test_the_hold_is_at_most_one_character_short_of_the_longest_stop():
    matcher = StopStringMatcher(("aaaa", "ab"))
    assert matcher.feed("x" * 1000 + "aaaaa"[:3]) == "x" * 1000  # "aaa" could still become "aaaa"
    assert matcher.feed("b") == "aa" and matcher.matched  # "ab" found, two characters in
