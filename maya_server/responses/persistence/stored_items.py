"""Request input items ↔ the JSON items the store keeps and `input_items` lists.

A stored item is what OpenAI's API returns for it: every item has an `id`
(generated when the client sent none) and a `status`, and a message's string
content becomes a list of parts. Ids must be unique within a conversation's
history, since `input_items?after=<id>` pages by them; a new item reusing an
id already in the history is a 400. Stored items parse back, unchanged, into
the request models, so a `previous_response_id` history replays through the
same conversion as an inline one.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from ...errors import InvalidRequestError
from ..assembly.assembler import new_id
from ..request.items import FunctionCallItem, FunctionCallOutputItem, InputImage, InputItem, MessageItem, parse_item
from ...util.echoed import echoed

ID_PREFIXES = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs"}


def stored_input_items(items: Sequence[InputItem], taken_ids: Iterable[str] = ()) -> list[dict]:
    """This request's input items as stored JSON, with ids; `taken_ids` are the history's."""
    taken = set(taken_ids)
    stored = []
    for i, item in enumerate(items):
        data = _stored(item)
        if data["id"] in taken:
            raise InvalidRequestError(
                f"Duplicate item id {echoed(data['id'])!r}: an item with this id is already in the conversation.",
                param=f"input[{i}].id",
            )
        taken.add(data["id"])
        stored.append(data)
    return stored


def replay(items: Sequence[dict]) -> tuple[InputItem, ...]:
    """Stored JSON items back into request items; an error here would be Maya's own, at the history."""
    return tuple(parse_item(item, ("previous_response_id",)) for item in items)


def _stored(item: InputItem) -> dict:
    data = item.model_dump(exclude_none=True)
    if isinstance(item, MessageItem):
        if isinstance(item.content, str):
            data["content"] = [_text_part(item.role, item.content)]
        else:
            data["content"] = [_part(part, dumped) for part, dumped in zip(item.content, data["content"])]
    if isinstance(item, FunctionCallOutputItem) and not isinstance(item.output, str):
        data["output"] = [_part(part, dumped) for part, dumped in zip(item.output, data["output"])]
    if isinstance(item, (MessageItem, FunctionCallItem, FunctionCallOutputItem)):
        data.setdefault("status", "completed")
    data.setdefault("id", new_id(ID_PREFIXES[data["type"]]))
    return data


def _text_part(role: str, text: str) -> dict:
    if role == "assistant":
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"type": "input_text", "text": text}


def _part(part: object, dumped: dict) -> dict:
    """OpenAI returns an image part with its detail, which Maya only serves as `auto`."""
    if isinstance(part, InputImage):
        return {**dumped, "detail": "auto"}
    return dumped
