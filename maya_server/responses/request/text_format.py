"""`text` of a Responses request: its output format (the shared `structured.formats`) and verbosity."""

from __future__ import annotations

from typing import Any, Literal, Sequence

from ...errors import InvalidRequestError
from ...structured.formats import OutputFormat, TextFormat, parse_format
from ...util.validation import validate_model
from ...util.wire import Wire, bad_value, path


class TextConfig(Wire):
    format: OutputFormat = TextFormat()
    verbosity: Literal["low", "medium", "high"] | None = None


def parse_text_config(raw: Any, prefix: Sequence[Any] = ("text",)) -> TextConfig:
    """The `text` object; its `format` is dispatched on `type` so errors keep their exact path."""
    if not isinstance(raw, dict):
        raise InvalidRequestError(f"Invalid type for '{path(prefix)}': expected an object.", param=path(prefix))
    if "format" in raw and raw["format"] is not None:
        raw = {**raw, "format": parse_format(raw["format"], (*prefix, "format"))}
    else:
        raw = {k: v for k, v in raw.items() if k != "format"}
    config = validate_model(TextConfig, raw, prefix=prefix)
    if config.verbosity not in (None, "medium"):
        raise bad_value(
            path(prefix, "verbosity"),
            f"{config.verbosity!r}. Only 'medium' is supported: Maya does not steer the length of the output.",
        )
    return config
