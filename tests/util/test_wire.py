"""The shared request-model base (`Wire`) and its refusal helpers: typos and reassignments are refused,
an unsupported field is named exactly, and a dispatch tag that is not a string is a 400, not a crash."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from maya_server.errors import InvalidRequestError
from maya_server.util.wire import Wire, bad_value, path, reject_unsupported, tag


class Tool(Wire):
    name: str
    file_ids: list[str] | None = None
    service_tier: str | None = None


REASONS = {"file_ids": "files are not stored here.", "service_tier": "there is one tier."}


def test_wire_models_forbid_unknown_fields_and_are_frozen():
    with pytest.raises(ValidationError):
        Tool.model_validate({"name": "f", "nmae": "g"})
    tool = Tool(name="f")
    with pytest.raises(ValidationError):
        tool.name = "g"


def test_path_joins_a_prefix_and_the_rest():
    assert path(("input", 2), "content", 0) == "input[2].content[0]"
    assert path((), "tools") == "tools"
    assert path(()) == ""


def test_reject_unsupported_names_the_first_field_set_in_reasons_order():
    tool = Tool(name="f", file_ids=["a"], service_tier="flex")
    with pytest.raises(InvalidRequestError) as caught:
        reject_unsupported(tool, ("tools", 1), REASONS)
    error = caught.value
    assert error.status == 400 and error.param == "tools[1].file_ids"
    assert error.message == "'tools[1].file_ids' is not supported: files are not stored here."


def test_reject_unsupported_lets_absent_and_null_fields_pass():
    reject_unsupported(Tool(name="f"), (), REASONS)
    reject_unsupported(Tool.model_validate({"name": "f", "file_ids": None}), (), REASONS)


@pytest.mark.parametrize(("field", "value"), [("file_ids", []), ("file_ids", [""]), ("service_tier", "")],
                         ids=["empty list", "list of empty", "empty string"])
def test_reject_unsupported_refuses_a_set_field_however_empty(field, value):
    """The twin of the test above: only absent and null pass; an empty value is still set."""
    with pytest.raises(InvalidRequestError) as caught:
        reject_unsupported(Tool.model_validate({"name": "f", field: value}), (), REASONS)
    assert caught.value.param == field and caught.value.message.endswith(REASONS[field])


def test_tag_returns_a_string_or_the_default_for_absent_and_null():
    assert tag({"type": "message"}, "type", ("input", 0)) == "message"
    assert tag({}, "type", ()) is None
    assert tag({"role": None}, "role", (), default="user") == "user"  # an SDK dumps an unset field as null


@pytest.mark.parametrize("value", [{"a": 1}, ["message"], 3, True])
def test_a_tag_that_is_not_a_string_is_a_400_naming_it(value):
    with pytest.raises(InvalidRequestError) as caught:
        tag({"type": value}, "type", ("input", 4))
    assert caught.value.param == "input[4].type"
    assert caught.value.message == "Invalid type for 'input[4].type': expected a string."


def test_bad_value_is_an_invalid_value_error_at_its_param():
    error = bad_value("tool_choice", "'sometimes' is not a choice.")
    assert isinstance(error, InvalidRequestError) and error.param == "tool_choice"
    assert error.body()["error"] == {"message": "Invalid value for 'tool_choice': 'sometimes' is not a choice.",
                                     "type": "invalid_request_error", "param": "tool_choice", "code": None}
