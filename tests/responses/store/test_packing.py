"""The stored byte format of a response: it comes back as it was, and it is as small as it claims."""

from __future__ import annotations

import orjson
import pytest

from maya_server.neutral.events import TextDelta
from maya_server.neutral.events import Finished, Usage
from maya_server.responses.assembly.assembler import ResponseAssembler
from maya_server.responses.request.request import parse_responses_request
from maya_server.responses.store.packing import (
    ENTRY_KEYS, pack_envelope, pack_item, pack_own, unpack_item, unpack_own, unpack_response,
)

from tests.responses.store.test_core import answer, item, response

FULL_USAGE = {"input_tokens": 9, "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 0},
              "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 14}


def round_trip(original: dict) -> dict:
    outputs = [pack_item(output) for output in original["output"]]
    return unpack_response(pack_own(original), pack_envelope(original), outputs)


def maya_snapshot(text: str) -> dict:
    """A finished response exactly as Maya's assembler writes it."""
    assembler = ResponseAssembler(parse_responses_request({"model": "m", "input": "hi", "store": True}), model="m")
    assembler.opening()
    assembler.on_event(TextDelta(text))
    assembler.on_event(Finished("stop", Usage(12, 3, 7, 2)))
    return assembler.snapshot()


@pytest.mark.parametrize("usage", [FULL_USAGE, None, {"input_tokens": 1, "output_tokens": 1}],
                         ids=["full usage", "no usage", "usage of another shape"])
def test_a_response_comes_back_as_it_was(usage):
    original = {**response("r1", answer("m1"), previous="r0"), "usage": usage}
    assert round_trip(original) == original


def test_a_response_from_the_assembler_comes_back_as_it_was():
    original = maya_snapshot("Bonjour")
    assert round_trip(original) == original
    assert unpack_own(pack_own(original))["usage"] == original["usage"]


def test_full_usage_is_packed_as_the_array_of_its_numbers():
    own = orjson.loads(pack_own({**response("r1"), "usage": FULL_USAGE}))
    assert own[ENTRY_KEYS.index("usage")] == [9, 4, 0, 5, 2, 14]


def test_a_usage_of_another_shape_is_kept_as_an_object():
    odd = {"input_tokens": 1, "output_tokens": 1, "extra": {"x": 2}}
    own = orjson.loads(pack_own({**response("r1"), "usage": odd}))
    assert own[ENTRY_KEYS.index("usage")] == odd


def test_unicode_survives_every_part():
    text = "naïve 日本語 🙂 \u2028 \"quoted\" \\ back\x00slash"
    original = {**response("r1", answer("m1", text)), "instructions": text}
    original["output"][0]["content"][0]["annotations"] = [{"type": "note", "text": text}]
    assert round_trip(original) == original
    assert unpack_item(pack_item(item("u1", text))) == item("u1", text)


def test_nested_items_survive():
    call_output = {"id": "fco_1", "type": "function_call_output", "call_id": "c1", "status": "completed",
                   "output": [{"type": "input_text", "text": "a"}, {"type": "input_image", "image_url": "data:x",
                                                                    "detail": "auto"}]}
    call = {"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "f", "status": "completed",
            "arguments": orjson.dumps({"deep": [{"a": [1, 2, {"b": None}]}]}).decode()}
    original = {**response("r1", call, call_output), "tools": [{"type": "function", "name": "f", "parameters": {
        "type": "object", "properties": {"deep": {"type": "array", "items": {"type": "object"}}}}}]}
    assert round_trip(original) == original


def test_the_envelope_holds_everything_but_the_own_fields_and_the_output():
    original = {**response("r1", answer("m1")), "instructions": "be brief", "temperature": 0.5}
    envelope = orjson.loads(pack_envelope(original))
    assert set(envelope) == set(original) - set(ENTRY_KEYS) - {"output"}
    assert envelope["instructions"] == "be brief" and envelope["temperature"] == 0.5


def test_turns_of_one_conversation_share_their_envelope_bytes():
    """What the store keeps once per owner: two turns differing only in their own fields agree on it."""
    first = maya_snapshot("one")
    second = {**maya_snapshot("two"), "previous_response_id": first["id"]}
    assert first["id"] != second["id"] and first["created_at"] <= second["created_at"]
    assert pack_envelope(first) == pack_envelope(second)
    assert pack_own(first) != pack_own(second)


def test_own_fields_are_packed_smaller_than_as_an_object():
    """The point of the array layout: no field names, and usage as six numbers, in every response."""
    snapshot = maya_snapshot("Bonjour")
    plain = orjson.dumps({k: snapshot[k] for k in ENTRY_KEYS})
    packed = pack_own(snapshot)
    assert len(packed) < len(plain) / 2, (len(packed), len(plain))
    assert orjson.loads(packed)[ENTRY_KEYS.index("usage")] == [12, 3, 0, 7, 2, 19]
