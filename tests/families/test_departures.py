"""`departures_of` lists, for a family and a battery conversation, exactly the departures that conversation
exercises: those whose two changes of the template's inputs (what the template is known to do, what Maya
decided) differ for it. One listed where they agree would be reported as seen without being looked at; one
missing would leave that conversation's difference unexplained."""

from __future__ import annotations

import pytest

from maya_server.families.battery import BATTERY, template_messages, template_tools
from maya_server.families.conformance import template_kwargs
from maya_server.families.departures import DEPARTURES, departures_of

FAMILIES = sorted({family for departure in DEPARTURES.values() for family in departure.families})


def exercised(family: str, name: str) -> tuple[str, ...]:
    conversation = BATTERY[name]
    inputs = {"messages": template_messages(conversation), "tools": template_tools(conversation),
              **template_kwargs(family, conversation)}
    return tuple(key for key, d in DEPARTURES.items() if family in d.families
                 and d.template_does(inputs, conversation) != d.decide(inputs, conversation))


@pytest.mark.parametrize("family", FAMILIES)
def test_each_battery_conversation_lists_the_departures_it_exercises(family):
    for name in BATTERY:
        assert departures_of(family, name) == exercised(family, name), name


def test_without_a_conversation_every_departure_of_the_family():
    assert departures_of("glm-5.2") == ("glm developer", "glm-5.2 effort")
    assert departures_of("deepseek-v4") == ("deepseek-v4 developer",)
    assert departures_of("chatml") == ()
