"""The Chat Completions request body, validated field by field.

What may arrive is what the official SDK's request types declare (openai-python's
`CompletionCreateParams` and `ChatCompletion*MessageParam`): every field they declare is
accepted, `null` where it is nullable. A field that asks for something Maya cannot do
(n > 1, logprobs, audio, web search, the deprecated `functions`) is a 400 naming it, never
ignored. Fields the SDK adds to the message objects it returns (`annotations`, `parsed`,
`tool_calls[].index`, `function.parsed_arguments`, and the nulls `audio`, `function_call`),
so that `messages.append(reply.model_dump())` replays a turn, are accepted and dropped.
Anything else is a 400 naming the field: a typo never passes silently.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from ..neutral.conversation import ReasoningEffort
from ..errors import InvalidRequestError
from ..util.validation import validate_model

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


class RefusalContentPart(_Strict):
    """An assistant's refusal, replayed: its text is part of what the assistant said."""

    type: Literal["refusal"]
    refusal: StrictStr


class FunctionCallBody(_Strict):
    name: StrictStr
    arguments: StrictStr
    parsed_arguments: Any = None
    """Added by the SDK's `parse()` and `stream()` helpers to the calls they return: accepted, dropped."""


class ToolCallBody(_Strict):
    id: StrictStr
    type: Literal["function"] = "function"
    function: FunctionCallBody
    index: StrictInt | None = None
    """The position the SDK's stream helper keeps on each call it accumulated: accepted, dropped."""


class AudioReference(_Strict):
    id: StrictStr


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
    content: Union[StrictStr, list[Union[TextContentPart, RefusalContentPart]], None] = None
    reasoning_content: StrictStr | None = None
    tool_calls: list[ToolCallBody] | None = None
    name: StrictStr | None = None
    refusal: StrictStr | None = None
    audio: AudioReference | None = None
    """A reference to an earlier audio answer: null (as the SDK replays Maya's answers) or refused."""
    function_call: FunctionCallBody | None = None
    """The deprecated single call: null (as the SDK replays) or refused in favour of `tool_calls`."""
    annotations: list[Any] | None = None
    """The SDK's echo of an answer's annotations: accepted, dropped."""
    parsed: Any = None
    """The SDK's `parse()` result on the message it returns: accepted, dropped."""


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
    include_obfuscation: StrictBool | None = None
    """Maya adds no obfuscation padding, which is what `false` asks; `true` is accepted as harmless."""


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
    prompt_cache_key: StrictStr | None = Field(default=None, max_length=256)
    """A hint only: llama-server reuses the longest cached prefix whatever the key."""
    safety_identifier: StrictStr | None = Field(default=None, max_length=128)
    service_tier: StrictStr | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    top_logprobs: StrictInt | None = Field(default=None, ge=0, le=20)
    modalities: list[Literal["text", "audio"]] | None = None
    logit_bias: dict[StrictStr, Number] | None = None
    audio: Any = None
    function_call: Any = None
    functions: list[Any] | None = None
    moderation: Any = None
    prediction: Any = None
    prompt_cache_options: Any = None
    prompt_cache_retention: Any = None
    web_search_options: Any = None
    return_progress: StrictBool | None = None
    """Maya's extension (llama.cpp's convention): `prompt_progress` chunks before the first token of a stream."""
    strata_mcp: StrictBool | None = None
    """Maya's extension: offer the operator's MCP tools and run their calls on the server (chat/mcp_loop.py)."""


_UNSUPPORTED = {
    "audio": "Maya generates text only; omit 'audio'.",
    "function_call": "the deprecated functions API is not supported; send 'tools' and 'tool_choice'.",
    "moderation": "Maya does not run moderation.",
    "prediction": "predicted outputs are not supported.",
    "prompt_cache_options": "Maya reuses cached prompt prefixes natively and takes no cache options.",
    "prompt_cache_retention": "Maya reuses cached prompt prefixes natively and takes no cache retention.",
    "web_search_options": "Maya has no web search; hosted tools are not available.",
}
_UNSUPPORTED_IN_MESSAGES = {
    "audio": "Maya never produced audio, so no audio answer can be referenced; omit it or send null.",
    "function_call": "the deprecated single function call is not supported; replay it as 'tool_calls'.",
}
_UNSUPPORTED_PARTS = {
    "input_audio": "Maya does not take audio input.",
    "file": "Maya does not read files; send the text as a 'text' part.",
}
_PART_TYPES = {"user": ("text", "image_url"), "tool": ("text", "image_url"), "assistant": ("text", "refusal"),
               "system": ("text",), "developer": ("text",)}


def parse_chat_request(data: dict) -> tuple[ChatRequest, list[Message]]:
    """The validated request and its messages, each checked against its role's shape."""
    request = validate_model(ChatRequest, data)
    _reject_unsupported(request)
    messages = [_parse_message(i, m) for i, m in enumerate(request.messages)]
    stops = [request.stop] if isinstance(request.stop, str) else (request.stop or [])
    if len(stops) > 4:
        raise InvalidRequestError("'stop' accepts at most 4 sequences.", param="stop")
    _check_tool_choice(request)
    return request, messages


def _reject_unsupported(request: ChatRequest) -> None:
    """Fields the SDK declares that ask for what Maya cannot do: a 400 naming each, unless null or the value
    that asks for nothing (an empty `functions` or `logit_bias`, text-only `modalities`, `top_logprobs: 0`)."""
    for name, reason in _UNSUPPORTED.items():
        if getattr(request, name) is not None:
            _refuse(name, reason)
    if request.functions:
        _refuse("functions", _UNSUPPORTED["function_call"])
    if request.logit_bias:
        _refuse("logit_bias", "token biases are not supported.")
    if request.modalities is not None and set(request.modalities) != {"text"}:
        _refuse("modalities", "Maya generates text only; send [\"text\"] or omit it.")
    if request.top_logprobs:
        _refuse("top_logprobs", "log probabilities are not supported; send 0 or omit it.")
    if request.service_tier not in (None, "auto", "default"):
        _refuse("service_tier", f"{request.service_tier!r}: only 'auto' and 'default' are supported.")
    if request.verbosity not in (None, "medium"):
        _refuse("verbosity", f"{request.verbosity!r}: only 'medium' is supported; Maya does not steer the length "
                             "of the output.")


def _refuse(param: str, reason: str) -> None:
    raise InvalidRequestError(f"'{param}' is not supported: {reason}", param=param)


def _parse_message(index: int, raw: dict) -> Message:
    if not isinstance(raw, dict):
        raise InvalidRequestError(f"Invalid type for 'messages[{index}]': expected an object.", param=f"messages[{index}]")
    role = raw.get("role")
    model = MESSAGE_MODELS.get(role) if isinstance(role, str) else None
    if model is None:
        hint = " ('function' messages belong to the deprecated functions API: send 'tool' messages)" \
            if role == "function" else ""
        raise InvalidRequestError(
            f"Invalid value for 'messages[{index}].role': {role!r}. Supported roles are "
            f"'system', 'developer', 'user', 'assistant' and 'tool'{hint}.",
            param=f"messages[{index}].role",
        )
    _check_part_types(index, role, raw.get("content"))
    message = validate_model(model, raw, prefix=("messages", index))
    if isinstance(message, AssistantMessage):
        for name, reason in _UNSUPPORTED_IN_MESSAGES.items():
            if getattr(message, name) is not None:
                _refuse(f"messages[{index}].{name}", reason)
    return message


def _check_part_types(index: int, role: str, content: Any) -> None:
    """Each content part's `type` is one this role takes; the SDK's audio and file parts are refused by name."""
    if not isinstance(content, list):
        return
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        where = f"messages[{index}].content[{j}].type"
        if kind is not None and not isinstance(kind, str):
            raise InvalidRequestError(f"Invalid type for '{where}': expected a string.", param=where)
        if kind in _UNSUPPORTED_PARTS:
            raise InvalidRequestError(f"'{kind}' content is not supported: {_UNSUPPORTED_PARTS[kind]}", param=where)
        if isinstance(kind, str) and kind not in _PART_TYPES[role]:
            names = " and ".join(repr(k) for k in _PART_TYPES[role])
            raise InvalidRequestError(f"Invalid value for '{where}': {kind!r}. Supported values in {role} messages "
                                      f"are {names}.", param=where)


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
