"""The stream checker itself: a real stream passes, and each kind of corruption is caught."""

from __future__ import annotations

import copy

import pytest

from tests.scripted import RecordingScriptedEngine
from tests.server import RunningServer, scripted_config

from tests.responses.api.sse import StreamResult, check_stream, read_stream


@pytest.fixture(scope="module")
def stream() -> StreamResult:
    server = RunningServer(scripted_config(), RecordingScriptedEngine(["<think>Some thought.</think>Hello there friend."]))
    try:
        with server.http() as http:
            return read_stream(http, {"model": "m", "input": "hi"})
    finally:
        server.stop()


def first(result: StreamResult, kind: str):
    return result.events[result.index(kind)]


def corrupt_sequence(result):
    result.events[5].sequence_number += 1


def corrupt_delta_text(result):
    first(result, "response.output_text.delta").delta += "!"


def corrupt_delta_index(result):
    first(result, "response.output_text.delta").output_index = 0


def corrupt_delta_item(result):
    first(result, "response.output_text.delta").item_id = first(result, "response.reasoning_text.delta").item_id


def drop_item_done(result):
    del result.events[result.index("response.output_item.done")]
    for number, event in enumerate(result.events):
        event.sequence_number = number


def corrupt_final_output(result):
    result.final.output[1].content[0].text = "something else"


def drop_terminal(result):
    result.events.pop()


@pytest.mark.parametrize("corrupt", [corrupt_sequence, corrupt_delta_text, corrupt_delta_index, corrupt_delta_item,
                                     drop_item_done, corrupt_final_output, drop_terminal])
def test_each_corruption_is_caught(stream, corrupt):
    check_stream(stream)
    broken = copy.deepcopy(stream)
    corrupt(broken)
    with pytest.raises(AssertionError):
        check_stream(broken)
