"""Request input items as the store keeps them: every item gets an id (its kind's prefix when the client sent
none) and a `status`, a message's string content becomes one part (input_text, or output_text for the
assistant), an image part's detail is `auto`, an id already in the history or the request is a 400 at
`input[i].id`, and stored items replay unchanged into the same request models."""

from __future__ import annotations

import re

import pytest

from maya_server.errors import InvalidRequestError
from maya_server.responses.request.items import parse_input
from maya_server.responses.persistence.stored_items import replay, stored_input_items

IMAGE = {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}


def test_ids_are_generated_with_each_kinds_prefix_and_a_status_is_added():
    stored = stored_input_items(parse_input([
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "42"},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "t"}]},
    ]))
    prefixes = [re.fullmatch(r"([a-z]+)_[0-9a-f]{32}", item["id"]).group(1) for item in stored]
    assert prefixes == ["msg", "fc", "fco", "rs"]
    assert [item.get("status") for item in stored] == ["completed", "completed", "completed", None]
    assert len({item["id"] for item in stored}) == 4


def test_a_clients_id_and_status_are_kept():
    (item,) = stored_input_items(parse_input([{"role": "user", "content": "hi", "id": "msg_mine",
                                               "status": "incomplete"}]))
    assert item["id"] == "msg_mine" and item["status"] == "incomplete"


def test_string_content_becomes_one_part_of_the_roles_kind():
    user, assistant = stored_input_items(parse_input([{"role": "user", "content": "q"},
                                                      {"role": "assistant", "content": "a"}]))
    assert user["content"] == [{"type": "input_text", "text": "q"}]
    assert assistant["content"] == [{"type": "output_text", "text": "a", "annotations": [], "logprobs": []}]


def test_image_parts_are_stored_with_detail_auto_in_messages_and_outputs():
    message, output = stored_input_items(parse_input([
        {"role": "user", "content": [IMAGE]},
        {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "t"}, IMAGE]},
    ]))
    assert message["content"] == [{**IMAGE, "detail": "auto"}]
    assert output["output"] == [{"type": "input_text", "text": "t"}, {**IMAGE, "detail": "auto"}]


@pytest.mark.parametrize("taken, items, param", [
    (["msg_1"], [{"role": "user", "content": "a", "id": "msg_1"}], "input[0].id"),
    ([], [{"role": "user", "content": "a", "id": "x"}, {"role": "user", "content": "b", "id": "x"}], "input[1].id"),
])
def test_a_reused_id_is_a_400_at_its_item(taken, items, param):
    with pytest.raises(InvalidRequestError) as caught:
        stored_input_items(parse_input(items), taken)
    assert caught.value.status == 400 and caught.value.param == param
    assert "already in the conversation" in caught.value.message


def test_stored_items_replay_into_the_same_request_models():
    items = parse_input([
        {"role": "user", "content": [{"type": "input_text", "text": "q"}, IMAGE]},
        {"role": "assistant", "content": "a"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "42"},
    ])
    stored = stored_input_items(items)
    replayed = replay(stored)
    assert stored_input_items(replayed) == stored
    assert [type(item) for item in replayed] == [type(item) for item in items]
    assert replayed[2].call_id == "c" and replayed[0].content[1].detail == "auto"
