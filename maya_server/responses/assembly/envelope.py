"""The request-derived fields of a response object (what OpenAI echoes back).

`client_metadata` is deliberately absent: it is accepted as diagnostic
context and never stored or echoed.
"""

from __future__ import annotations

from ...engine.base import DEFAULT_TEMPERATURE, DEFAULT_TOP_P
from ..request.request import ResponsesRequest
from ..request.tools import FunctionToolChoice
from ...structured.formats import JsonSchemaFormat, OutputFormat


def response_envelope(request: ResponsesRequest, model: str) -> dict:
    return {
        "model": model,
        "instructions": request.instructions,
        "max_output_tokens": request.max_output_tokens,
        "max_tool_calls": request.max_tool_calls,
        "metadata": dict(request.metadata or {}),
        "parallel_tool_calls": request.parallel_tool_calls is not False,
        "previous_response_id": request.previous_response_id,
        "prompt_cache_key": request.prompt_cache_key,
        "reasoning": {"effort": request.effort, "summary": None},
        "safety_identifier": request.safety_identifier,
        "service_tier": "default",
        "store": request.stored,
        "background": request.background is True,
        "temperature": DEFAULT_TEMPERATURE if request.temperature is None else request.temperature,
        "top_p": DEFAULT_TOP_P if request.top_p is None else request.top_p,
        "presence_penalty": request.presence_penalty or 0.0,
        "frequency_penalty": request.frequency_penalty or 0.0,
        "top_logprobs": request.top_logprobs or 0,
        "text": {"format": _format(request.output_format), "verbosity": "medium"},
        "tool_choice": _tool_choice(request),
        "tools": [_tool(t) for t in request.tools],
        "truncation": "disabled",
        "user": request.user,
    }


def _format(fmt: OutputFormat) -> dict:
    """A json_schema format echoes `description` and `strict` always (the Open Responses schema requires them)."""
    if isinstance(fmt, JsonSchemaFormat):
        return {**fmt.model_dump(by_alias=True), "strict": bool(fmt.strict)}
    return fmt.model_dump(by_alias=True, exclude_none=True)


def _tool_choice(request: ResponsesRequest):
    choice = request.tool_choice
    return {"type": "function", "name": choice.name} if isinstance(choice, FunctionToolChoice) else choice


def _tool(tool) -> dict:
    return {"type": "function", "name": tool.name, "description": tool.description,
            "parameters": tool.parameters, "strict": bool(tool.strict)}
