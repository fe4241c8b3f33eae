"""The neutral conversation: what both APIs convert their requests into.

Chat Completions and the Responses API describe the same things (messages, tool
calls, tool results, reasoning, images) with different JSON. Both convert into
these immutable dataclasses, and the families render only these, so no family
ever knows which HTTP API a request came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union

Role = Literal["system", "developer", "user", "assistant"]
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
"""OpenAI's efforts, and `max`: DeepSeek's own tier above `xhigh` (its toolkit accepts it as an OpenAI effort).
Only DeepSeek families have it; a request for it elsewhere is refused before generation
(`families/effort_tiers.py`), so a family renders `max` only if it is one that knows it."""


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    """An image by URL (http(s) or a data: URL); only the `auto` detail is supported.

    `param` is where the request carried it (errors name it); `data` is the image once
    `images.ImageLoader` fetched, checked, scaled to the encoder's bound and re-encoded it (PNG:
    lossless and compact, and only pixels the checks passed reach the engine's own decoder)."""

    url: str
    param: str | None = field(default=None, compare=False)
    data: bytes | None = field(default=None, compare=False, repr=False)


Part = Union[TextPart, ImagePart]


@dataclass(frozen=True)
class ToolCall:
    """A call the assistant made: `arguments` is the JSON object text."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Message:
    role: Role
    content: tuple[Part, ...] = ()
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()

    @property
    def text(self) -> str:
        """The text parts joined; images are left out."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass(frozen=True)
class ToolResult:
    """The output of one tool call, answered by the client."""

    call_id: str
    content: tuple[Part, ...] = ()
    name: str | None = None

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


Turn = Union[Message, ToolResult]


@dataclass(frozen=True)
class ToolSpec:
    """A function the model may call; `parameters` is its JSON Schema."""

    name: str
    description: str | None = None
    parameters: dict | None = None
    strict: bool = False


@dataclass(frozen=True)
class NamedToolChoice:
    name: str


ToolChoice = Union[Literal["auto", "none", "required"], NamedToolChoice]


@dataclass(frozen=True)
class OutputSchema:
    """Structured output the request asks for: a JSON object, held to `schema` when one is given (a `json_schema`
    format; None: `json_object`). Each family asks for it in its model's own words (`families/history.py`)."""

    schema: dict | None = None
    name: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class Conversation:
    turns: tuple[Turn, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = "auto"
    reasoning_effort: ReasoningEffort | None = None
    parallel_tool_calls: bool = True
    extra_system: tuple[str, ...] = field(default=())
    """System text the server adds, rendered after `turns`' own system text."""
    output: OutputSchema | None = None
    """The structured output asked for (None: text)."""

    @classmethod
    def from_request(
        cls,
        turns: tuple[Turn, ...],
        *,
        tools: tuple[ToolSpec, ...],
        tool_choice: ToolChoice,
        reasoning_effort: ReasoningEffort | None,
        parallel_tool_calls: bool | None,
        extra_system: tuple[str, ...] = (),
        output: OutputSchema | None = None,
    ) -> "Conversation":
        """The rules both APIs share: `tool_choice:"none"` hides the tools from the model,
        and parallel calls are allowed unless the request says false."""
        return cls(
            turns=turns,
            tools=tools if tool_choice != "none" else (),
            tool_choice=tool_choice,
            reasoning_effort=reasoning_effort,
            parallel_tool_calls=parallel_tool_calls is not False,
            extra_system=extra_system,
            output=output,
        )

    def tool(self, name: str) -> ToolSpec | None:
        return next((t for t in self.tools if t.name == name), None)


def image_parts(conversation: Conversation) -> list[ImagePart]:
    """The conversation's images in prompt order: the one walk that finds them, for the loader, the
    pipeline's checks and the route that sends a background job's images to its worker."""
    return [part for turn in conversation.turns for part in turn.content if isinstance(part, ImagePart)]


@dataclass(frozen=True)
class PartialItem:
    """One item of an assistant turn cut short: its reasoning, its text, or a tool call (`name`, `text` its
    arguments so far); `done` once the item was closed."""

    kind: Literal["reasoning", "text", "call"]
    text: str
    done: bool
    name: str = ""


@dataclass(frozen=True)
class PartialTurn:
    """What an assistant turn had published when its generation stopped (its replica went away): a family writes
    it after the generation prompt as the model wrote it (`Family.continuation`), and the model writes the rest."""

    items: tuple[PartialItem, ...] = ()
    raw: tuple[tuple[str, bool], ...] | None = None
    """The model's own text of the turn as far as it was published, in pieces (text, whether the parser read it as
    a tag): what is written back, byte for byte, whatever the family. None when the log kept no such text (a task
    logged by a replica older than this one): the family then writes the items back in its own syntax."""
