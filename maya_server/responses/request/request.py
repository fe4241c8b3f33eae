"""The `POST /v1/responses` body, validated before any generation.

Every parameter of OpenAI's Responses API is declared here with OpenAI's type
and range. Those Maya honours are parsed into a frozen `ResponsesRequest`;
those it cannot honour (conversations, reusable prompts, hosted tools,
summaries, non-default service tiers, automatic truncation, ...) are a 400
whose `param` names the exact field, so nothing is silently ignored.

The nested collections (`input`, `tools`, `tool_choice`, `text`) are parsed by
hand-written dispatchers called from "before" validators: they raise
`InvalidRequestError` themselves, which pydantic lets through unchanged, so a
deep error keeps its full path such as `input[3].content[1].image_url`.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, field_validator

from ...neutral.conversation import ReasoningEffort
from ...errors import InvalidRequestError
from ...util.validation import validate_model
from .items import InputItem, parse_input
from .tools import FunctionTool, ToolChoice, check_tool_choice, parse_tool_choice, parse_tools
from ...structured.formats import OutputFormat, TextFormat
from .text_format import TextConfig, parse_text_config
from ...util.wire import Wire, bad_value, reject_unsupported

METADATA_PAIRS = 16
METADATA_KEY_CHARS = 64
METADATA_VALUE_CHARS = 512
CLIENT_METADATA_BYTES = 16 * 1024
"""`client_metadata` (diagnostic context, never stored, echoed or logged): its keys and values together, UTF-8."""
ENCRYPTED_REASONING = "reasoning.encrypted_content"


class ReasoningConfig(Wire):
    effort: ReasoningEffort | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    generate_summary: Literal["auto", "concise", "detailed"] | None = None
    context: Literal["auto", "current_turn", "all_turns"] | None = None
    mode: StrictStr | None = None


class StreamOptions(Wire):
    include_obfuscation: StrictBool | None = None


def _one_message_string(schema: dict[str, Any]) -> None:
    """The parsed model holds `input` as items; on the wire a string is one user message too, so the
    described schema (`/openapi.json`) offers it first."""
    schema["anyOf"].insert(0, {"type": "string", "description": "One user message."})


class ResponsesRequest(Wire):
    """A validated request. `input` is a tuple of items (a string became one user message), or None
    when the request only continues `previous_response_id`."""

    model: StrictStr | None = None
    input: tuple[InputItem, ...] | None = Field(default=None, json_schema_extra=_one_message_string)
    instructions: StrictStr | None = None
    tools: tuple[FunctionTool, ...] = ()
    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: StrictBool | None = None
    reasoning: ReasoningConfig | None = None
    temperature: StrictFloat | None = Field(default=None, ge=0, le=2)
    top_p: StrictFloat | None = Field(default=None, ge=0, le=1)
    presence_penalty: StrictFloat | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: StrictFloat | None = Field(default=None, ge=-2, le=2)
    max_output_tokens: StrictInt | None = Field(default=None, ge=16)
    max_tool_calls: StrictInt | None = Field(default=None, ge=0)
    metadata: dict[StrictStr, StrictStr] | None = None
    prompt_cache_key: StrictStr | None = Field(default=None, max_length=256)
    client_metadata: dict[StrictStr, StrictStr] | None = None
    include: list[StrictStr] | None = None
    store: StrictBool | None = None
    background: StrictBool | None = None
    stream: StrictBool | None = None
    stream_options: StreamOptions | None = None
    previous_response_id: StrictStr | None = Field(default=None, min_length=1)
    truncation: Literal["auto", "disabled"] | None = None
    service_tier: StrictStr | None = None
    text: TextConfig | None = None
    user: StrictStr | None = None
    safety_identifier: StrictStr | None = Field(default=None, max_length=128)
    top_logprobs: StrictInt | None = Field(default=None, ge=0, le=20)
    conversation: Any = None
    prompt: Any = None
    prompt_cache_options: Any = None
    prompt_cache_retention: Any = None
    background_options: Any = None
    context_management: Any = None
    moderation: Any = None
    image: Any = None
    access_programs: Any = None
    return_progress: Any = None
    strata_mcp: Any = None

    @field_validator("input", mode="before")
    @classmethod
    def _parse_input(cls, raw: Any) -> Any:
        return None if raw is None else parse_input(raw)

    @field_validator("tools", mode="before")
    @classmethod
    def _parse_tools(cls, raw: Any) -> Any:
        return () if raw is None else parse_tools(raw)

    @field_validator("tool_choice", mode="before")
    @classmethod
    def _parse_tool_choice(cls, raw: Any) -> Any:
        return "auto" if raw is None else parse_tool_choice(raw)

    @field_validator("text", mode="before")
    @classmethod
    def _parse_text(cls, raw: Any) -> Any:
        return None if raw is None else parse_text_config(raw)

    @property
    def effort(self) -> ReasoningEffort | None:
        return self.reasoning.effort if self.reasoning else None

    @property
    def output_format(self) -> OutputFormat:
        return self.text.format if self.text else TextFormat()

    @property
    def stored(self) -> bool:
        """Responses are not stored unless the client asks: `store` defaults to false."""
        return self.store is True


_UNSUPPORTED_FIELDS = {
    "conversation": "Maya has no Conversations API; send the history in 'input' or continue with "
    "'previous_response_id'.",
    "prompt": "Maya has no reusable prompt templates; send 'instructions' and 'input'.",
    "prompt_cache_options": "Maya reuses cached prompt prefixes natively and takes no cache options.",
    "prompt_cache_retention": "Maya reuses cached prompt prefixes natively and takes no cache retention.",
    "background_options": "background tasks run with Maya's own settings.",
    "context_management": "Maya does not compact context on the server.",
    "moderation": "Maya does not run moderation.",
    "image": "images are encoded with the server's vision encoder settings.",
    "access_programs": "Maya has no access programs.",
    "return_progress": "it is a Maya extension of /v1/chat/completions only.",
    "strata_mcp": "it is a Maya extension of /v1/chat/completions only.",
}
_UNSUPPORTED_REASONING = {
    "summary": "Maya returns plain reasoning text, not generated summaries; omit it "
    "(Codex CLI: model_reasoning_summary = \"none\" in config.toml).",
    "generate_summary": "Maya returns plain reasoning text, not generated summaries; omit it.",
    "context": "the reasoning in 'input' is what the model sees.",
    "mode": "Maya has a single reasoning mode; use 'effort'.",
}


def parse_responses_request(data: Any) -> ResponsesRequest:
    """The validated request, or an `InvalidRequestError` (400) naming the first bad field."""
    request = validate_model(ResponsesRequest, data)
    reject_unsupported(request, (), _UNSUPPORTED_FIELDS)
    if request.reasoning is not None:
        reject_unsupported(request.reasoning, ("reasoning",), _UNSUPPORTED_REASONING)
    if request.input is None and request.previous_response_id is None:
        raise InvalidRequestError("Missing required parameter: 'input'.", param="input")
    _check_string_map(request.metadata, "metadata")
    _check_client_metadata(request.client_metadata)
    _check_include(request)
    _check_modes(request)
    check_tool_choice(request.tool_choice, request.tools)
    return request


def _check_string_map(values: Mapping[str, str] | None, param: str) -> None:
    """OpenAI's metadata limits: at most 16 pairs, keys up to 64 characters, values up to 512."""
    if values is None:
        return
    if len(values) > METADATA_PAIRS:
        raise bad_value(param, f"at most {METADATA_PAIRS} key-value pairs are allowed, got {len(values)}.")
    for key, value in values.items():
        if len(key) > METADATA_KEY_CHARS:
            raise bad_value(param, f"the key {key[:16]!r}... is longer than {METADATA_KEY_CHARS} characters.")
        if len(value) > METADATA_VALUE_CHARS:
            raise bad_value(f"{param}.{key}", f"values are limited to {METADATA_VALUE_CHARS} characters.")


def _check_client_metadata(values: Mapping[str, str] | None) -> None:
    """Any string values (Codex sends an 837-character JSON string), bounded only in total size."""
    size = sum(len(f"{k}{v}".encode("utf-8", "surrogatepass")) for k, v in (values or {}).items())
    if size > CLIENT_METADATA_BYTES:
        raise bad_value("client_metadata", f"its keys and values total {size} bytes; the limit is {CLIENT_METADATA_BYTES}.")


def _check_include(request: ResponsesRequest) -> None:
    """Only the encrypted-reasoning projection, and only when there is no reasoning to encrypt."""
    for i, value in enumerate(request.include or ()):
        if value != ENCRYPTED_REASONING:
            raise bad_value(
                f"include[{i}]", f"{value!r} is not supported; the only accepted value is {ENCRYPTED_REASONING!r}."
            )
        if request.effort != "none":
            raise bad_value(
                f"include[{i}]",
                f"{ENCRYPTED_REASONING!r} needs an explicit reasoning.effort of 'none': Maya cannot encrypt reasoning "
                "(Codex CLI: model_reasoning_effort = \"none\" in config.toml).",
            )


def _check_modes(request: ResponsesRequest) -> None:
    """Execution modes Maya has exactly one of, or only with an explicit opt-in."""
    if request.background and request.store is not True:
        raise bad_value("background", "background:true requires an explicit store:true.")
    if request.truncation == "auto":
        raise bad_value("truncation", "'auto' is not supported; only 'disabled' is: history is never silently dropped.")
    if request.service_tier not in (None, "auto", "default"):
        raise bad_value("service_tier", f"{request.service_tier!r}. Only 'auto' and 'default' are supported.")
    if request.max_tool_calls == 0 and request.tool_choice not in ("auto", "none"):
        raise bad_value("max_tool_calls", "0 allows no call, but tool_choice requires one.")
    if request.top_logprobs:
        raise bad_value("top_logprobs", "log probabilities are not supported; send 0 or omit it.")
