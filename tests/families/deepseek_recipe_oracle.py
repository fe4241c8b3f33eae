"""DeepSeek's own toolkit (deepseek-recipe 0.2.0) as the oracle of the DeepSeek families.

A conversation reaches the toolkit the way a client's request reaches it: as a Chat Completions body (or a
Responses body, for the request tests), converted by its `ChatCompletionRequest`/`ResponsesRequest` with default
`ConversionOptions` and rendered by `DeepseekV41Encoding` (model `DeepSeek-V4.1-Flash`) or `DeepseekV4Encoding`
(`DeepSeek-V4-Pro`). V4.1's image token is given V4.1's spelling, `<｜deepseek_image｜>` (the toolkit's default
spelling is V4's `<｜image｜>`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

import deepseek_recipe as recipe

from maya_server.neutral.conversation import Conversation, ImagePart, Message, TextPart, ToolResult

MODELS = {"deepseek-v4.1": "DeepSeek-V4.1-Flash", "deepseek-v4": "DeepSeek-V4-Pro"}
V41_SPELLING = recipe.SpecialTokens(image="<｜deepseek_image｜>")


@dataclass(frozen=True)
class OraclePrompt:
    text: str
    special: tuple[str, ...]
    """The spellings of the explicit special tokens, in order (the toolkit's `special_ranges`)."""
    conversation: object
    """The toolkit's converted conversation, for `ids`."""


def _options(family: str) -> recipe.ConversionOptions:
    options = recipe.ConversionOptions()
    return options.with_special_tokens(V41_SPELLING) if family == "deepseek-v4.1" else options


def encoding(family: str, tokenizer_file: str | None = None):
    encoder = recipe.DeepseekV41Encoding().with_special_tokens(V41_SPELLING) if family == "deepseek-v4.1" \
        else recipe.DeepseekV4Encoding()
    return encoder.with_tokenizer(_tokenizer(tokenizer_file)) if tokenizer_file else encoder


@lru_cache(maxsize=None)
def _tokenizer(path: str):
    return recipe.Tokenizer.from_file(path)


def render_body(body: dict, family: str, api: str = "chat") -> OraclePrompt:
    """The toolkit's prompt for a request body (`api`: chat or responses)."""
    request_type = recipe.ChatCompletionRequest if api == "chat" else recipe.ResponsesRequest
    converted = request_type({**body, "model": MODELS[family]}).convert(_options(family))
    rendered = encoding(family).render_conversation(converted.conversation)
    special = tuple(rendered.prompt[start:end] for start, end in rendered.special_ranges)
    return OraclePrompt(rendered.prompt, special, converted.conversation)


def oracle_ids(oracle: OraclePrompt, family: str, tokenizer_file: str) -> list[int]:
    return encoding(family, tokenizer_file).encode(oracle.conversation)


def render(conversation: Conversation, family: str) -> OraclePrompt:
    return render_body(chat_body(conversation), family)


def chat_body(conversation: Conversation) -> dict:
    """The Chat Completions body a client sends for `conversation` (developer as system: the toolkit's Chat
    conversion has no developer role, and Maya writes developer as system in both families)."""
    body: dict = {"messages": [_message(turn) for turn in conversation.turns]}
    if conversation.tools:
        body["tools"] = [{"type": "function", "function": _function(t)} for t in conversation.tools]
    if conversation.reasoning_effort is not None:
        body["reasoning_effort"] = conversation.reasoning_effort
    return body


def _function(tool) -> dict:
    function: dict = {"name": tool.name}
    if tool.description is not None:
        function["description"] = tool.description
    if tool.parameters is not None:
        function["parameters"] = tool.parameters
    if tool.strict:
        function["strict"] = True
    return function


def _content(parts) -> str | list[dict]:
    if all(isinstance(p, TextPart) for p in parts) and len(parts) <= 1:
        return parts[0].text if parts else ""
    return [{"type": "image_url", "image_url": {"url": p.url}} if isinstance(p, ImagePart)
            else {"type": "text", "text": p.text} for p in parts]


def _message(turn) -> dict:
    if isinstance(turn, ToolResult):
        return {"role": "tool", "tool_call_id": turn.call_id, "content": _content(turn.content)}
    assert isinstance(turn, Message)
    role = "system" if turn.role == "developer" else turn.role
    message: dict = {"role": role, "content": _content(turn.content)}
    if turn.reasoning is not None:
        message["reasoning_content"] = turn.reasoning
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in turn.tool_calls
        ]
    return message


def parse_completion(family: str, output: str, *, thinking: bool) -> dict:
    """DeepSeek's stream parser on a whole model output: `{"content", "reasoning", "calls": [(name, args)]}`."""
    generator = recipe.ChatCompletionRequest.chunk_generator(
        recipe.ChatCompletionRequest({"model": MODELS[family], "messages": [{"role": "user", "content": "x"}]})
        .convert(_options(family)), "id", MODELS[family])
    stage = recipe.ThinkingInitialStage.ReasoningStart if thinking else None
    processor = recipe.StreamProcessor(generator, recipe.ParsingOptions(thinking_initial_stage=stage))
    chunks = processor.push(recipe.InferenceChunk.text(output)) + processor.push(
        recipe.InferenceChunk.finish(recipe.InferenceFinishReason.Stop)) + processor.finish()
    content, reasoning, calls = "", "", {}
    for chunk in chunks:
        for choice in json.loads(chunk.to_json()).get("choices", []):
            delta = choice.get("delta") or {}
            content += delta.get("content") or ""
            reasoning += delta.get("reasoning_content") or ""
            for call in delta.get("tool_calls") or []:
                entry = calls.setdefault(call["index"], ["", ""])
                entry[0] += (call.get("function") or {}).get("name") or ""
                entry[1] += (call.get("function") or {}).get("arguments") or ""
    return {"content": content, "reasoning": reasoning,
            "calls": [(name, json.loads(arguments)) for name, arguments in calls.values()]}
