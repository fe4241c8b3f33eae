"""`outcome_of` / `limited`: an MCP `CallToolResult` → the text a model sees, within the size limit.

Built from the SDK's own result types. Pins: text blocks joined by newlines, structured content as
JSON only when there is no text, non-text blocks named rather than dropped, the error flag kept, and
a result over the limit (counted in UTF-8 bytes) replaced by an error saying so, never cut short.
"""

from __future__ import annotations

from types import SimpleNamespace

import mcp.types as t
import orjson
import pytest

from maya_server.mcp.results import ToolOutcome, limited, outcome_of

LIMIT = 10_000


def text(value: str) -> t.TextContent:
    return t.TextContent(type="text", text=value)


def result(*content, structured=None, is_error=False) -> t.CallToolResult:
    return t.CallToolResult(content=list(content), structured_content=structured, is_error=is_error)


def test_text_blocks_are_joined_by_newlines_and_empty_ones_skipped():
    assert outcome_of(result(text("first"), text(""), text("ünï ✓")), LIMIT) == ToolOutcome("first\nünï ✓", False)


def test_the_error_flag_is_kept():
    assert outcome_of(result(text("no such city"), is_error=True), LIMIT) == ToolOutcome("no such city", True)


def test_structured_content_is_its_json_only_without_text():
    data = {"temp": 21.5, "city": "Zürich"}
    assert outcome_of(result(structured=data), LIMIT).content == orjson.dumps(data).decode()
    assert outcome_of(result(text(""), structured=data), LIMIT).content == orjson.dumps(data).decode()
    assert outcome_of(result(text("21.5°C"), structured=data), LIMIT).content == "21.5°C"


@pytest.mark.parametrize("block, shown", [
    (t.ImageContent(type="image", data="AAAA", mime_type="image/png"), "[image image/png]"),
    (t.AudioContent(type="audio", data="AAAA", mime_type="audio/wav"), "[audio audio/wav]"),
    (SimpleNamespace(type="image", mime_type=""), "[image]"),
    (t.ResourceLink(type="resource_link", name="r", uri="file:///r.txt"), "[resource file:///r.txt]"),
    (t.EmbeddedResource(type="resource", resource=t.TextResourceContents(uri="file:///a", text="inside")), "inside"),
    (t.EmbeddedResource(type="resource", resource=t.BlobResourceContents(uri="file:///b", blob="AAAA")),
     "[resource file:///b]"),
    (SimpleNamespace(type="hologram"), "[hologram]"),
])
def test_blocks_that_are_not_text_are_named(block, shown):
    assert outcome_of(SimpleNamespace(content=[text("see:"), block], structured_content=None, is_error=False),
                      LIMIT).content == f"see:\n{shown}"


def test_no_content_at_all_is_an_empty_result():
    assert outcome_of(SimpleNamespace(content=None, structured_content=None, is_error=None), LIMIT) == \
        ToolOutcome("", False)


def test_a_result_at_the_limit_passes_and_one_byte_over_is_an_error():
    assert limited("é" * 5, False, 10) == ToolOutcome("é" * 5, False)  # 10 UTF-8 bytes, 5 characters
    over = limited("é" * 5 + "x", False, 10)
    assert over == ToolOutcome("The tool's result (11 bytes) is larger than the server's limit of 10 bytes.", True)


def test_the_limit_applies_to_the_joined_result():
    outcome = outcome_of(result(text("a" * 6), text("b" * 6)), 12)  # 13 bytes with the newline
    assert outcome.is_error and "(13 bytes)" in outcome.content and "aaaaaa" not in outcome.content
