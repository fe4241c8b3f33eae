"""The Chat Completions request body, validated field by field.

Unknown top-level fields are rejected (as OpenAI does) so a typo never passes
silently; parameters we cannot honour (n > 1, logprobs) are 400s,
not ignored.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from ..conversation import ReasoningEffort
from ..errors import InvalidRequestError
from ..validation import validate_model

Number = Union[StrictInt, StrictFloat]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextContentPart(_Strict):
    type: Literal["text"]
    text: StrictStr


class ImageUrl(_Strict):
    url: StrictStr
    detail: Literal["auto", "low", "high"] = "auto"


class ImageContentPart(_Strict):
    type: Literal["image_url"]
    image_url: ImageUrl


class FunctionCallBody(_Strict):
    name: StrictStr
    arguments: StrictStr


class ToolCallBody(_Strict):
    id: StrictStr
    type: Literal["function"] = "function"
    function: FunctionCallBody


class SystemMessage(_Strict):
    role: Literal["system", "developer"]
    content: Union[StrictStr, list[TextContentPart]]
    name: StrictStr | None = None


class UserMessage(_Strict):
    role: Literal["user"]
    content: Union[StrictStr, list[Union[TextContentPart, ImageContentPart]]]
    name: StrictStr | None = None


class AssistantMessage(_Strict):
    role: Literal["assistant"]
    content: Union[StrictStr, list[TextContentPart], None] = None
    reasoning_content: StrictStr | None = None
    tool_calls: list[ToolCallBody] | None = None
    name: StrictStr | None = None
    refusal: StrictStr | None = None


class ToolMessage(_Strict):
    """A tool's result; it may carry images (a screenshot tool), as OpenAI's tool messages do."""

    role: Literal["tool"]
    content: Union[StrictStr, list[Union[TextContentPart, ImageContentPart]]]
    tool_call_id: StrictStr


MESSAGE_MODELS = {
    "system": SystemMessage,
    "developer": SystemMessage,
    "user": UserMessage,
    "assistant": AssistantMessage,
    "tool": ToolMessage,
}
Message = Union[SystemMessage, UserMessage, AssistantMessage, ToolMessage]


class FunctionDefinition(_Strict):
    name: StrictStr = Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")
    description: StrictStr | None = None
    parameters: dict[str, Any] | None = None
    strict: StrictBool | None = None


class ToolDefinition(_Strict):
    type: Literal["function"]
    function: FunctionDefinition


class NamedFunction(_Strict):
    name: StrictStr


class NamedToolChoiceBody(_Strict):
    type: Literal["function"]
    function: NamedFunction


class StreamOptions(_Strict):
    include_usage: StrictBool = False


class ChatRequest(_Strict):
    model: StrictStr | None = None
    messages: list[dict[str, Any]] = Field(min_length=1)
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    max_tokens: StrictInt | None = Field(default=None, ge=1)
    max_completion_tokens: StrictInt | None = Field(default=None, ge=1)
    temperature: Number | None = Field(default=None, ge=0, le=2)
    top_p: Number | None = Field(default=None, ge=0, le=1)
    seed: StrictInt | None = None
    stop: Union[StrictStr, list[StrictStr], None] = None
    n: StrictInt | None = Field(default=None, ge=1, le=1)
    tools: list[ToolDefinition] | None = None
    tool_choice: Union[Literal["auto", "none", "required"], NamedToolChoiceBody, None] = None
    parallel_tool_calls: StrictBool | None = None
    reasoning_effort: ReasoningEffort | None = None
    presence_penalty: Number | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: Number | None = Field(default=None, ge=-2, le=2)
    logprobs: Literal[False] | None = None
    user: StrictStr | None = None
    metadata: dict[str, StrictStr] | None = None
    store: Literal[False] | None = None
    response_format: Any = None
    """Parsed by `structured.parse_response_format` (text, json_object, json_schema)."""
    return_progress: StrictBool | None = None
    """Maya's extension (llama.cpp's convention): `prompt_progress` chunks before the first token of a stream."""
    strata_mcp: StrictBool | None = None
    """Maya's extension: offer the operator's MCP tools and run their calls on the server (chat/mcp_loop.py)."""


def parse_chat_request(data: dict) -> tuple[ChatRequest, list[Message]]:
    """The validated request and its messages, each checked against its role's shape."""
    request = validate_model(ChatRequest, data)
    messages = [_parse_message(i, m) for i, m in enumerate(request.messages)]
    stops = [request.stop] if isinstance(request.stop, str) else (request.stop or [])
    if len(stops) > 4:
        raise InvalidRequestError("'stop' accepts at most 4 sequences.", param="stop")
    _check_tool_choice(request)
    return request, messages


def _parse_message(index: int, raw: dict) -> Message:
    if not isinstance(raw, dict):
        raise InvalidRequestError(f"Invalid type for 'messages[{index}]': expected an object.", param=f"messages[{index}]")
    role = raw.get("role")
    model = MESSAGE_MODELS.get(role) if isinstance(role, str) else None
    if model is None:
        raise InvalidRequestError(
            f"Invalid value for 'messages[{index}].role': {role!r}. Supported roles are "
            "'system', 'developer', 'user', 'assistant' and 'tool'.",
            param=f"messages[{index}].role",
        )
    return validate_model(model, raw, prefix=("messages", index))


def _check_tool_choice(request: ChatRequest) -> None:
    choice = request.tool_choice
    names = {t.function.name for t in request.tools or []}
    if isinstance(choice, NamedToolChoiceBody) and choice.function.name not in names:
        raise InvalidRequestError(
            f"tool_choice names the function {choice.function.name!r}, which is not in 'tools'.",
            param="tool_choice",
        )
    if choice == "required" and not names:
        raise InvalidRequestError("tool_choice 'required' needs at least one tool in 'tools'.", param="tool_choice")
