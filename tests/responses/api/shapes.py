"""The event-type shapes of Responses streams, composed by the tests (`*` = one or more deltas)."""

OPENING = ["response.created", "response.in_progress"]
REASONING = [
    "response.output_item.added",
    "response.content_part.added",
    "response.reasoning_text.delta*",
    "response.reasoning_text.done",
    "response.content_part.done",
    "response.output_item.done",
]
MESSAGE = [
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta*",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
]
CALL = [
    "response.output_item.added",
    "response.function_call_arguments.delta*",
    "response.function_call_arguments.done",
    "response.output_item.done",
]
FAILED = ["error", "response.failed"]
