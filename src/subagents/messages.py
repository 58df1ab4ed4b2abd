"""Anthropic-shaped messages, content blocks and token usage.

Messages and blocks are plain dicts typed as ``TypedDict``: they are the wire shape every
provider speaks, they go to transcripts and to the scripted model's ``record`` file unchanged,
and they cost nothing to serialise. Runtime objects that are not wire data (usage counters,
events) are dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class ThinkingBlock(TypedDict):
    type: Literal["thinking"]
    thinking: str
    signature: NotRequired[str]


class ToolUseBlock(TypedDict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(TypedDict):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[TextBlock]
    is_error: NotRequired[bool]


ContentBlock: TypeAlias = TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock


class Message(TypedDict):
    role: Literal["user", "assistant"]
    content: str | list[ContentBlock]


def text_block(text: str) -> TextBlock:
    return {"type": "text", "text": text}


def user_message(content: str | list[ContentBlock]) -> Message:
    return {"role": "user", "content": content}


def tool_result_block(tool_use_id: str, content: str, *, is_error: bool = False) -> ToolResultBlock:
    block: ToolResultBlock = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block


def blocks_of(message: Message) -> list[ContentBlock]:
    """The content of a message as a block list (a bare string becomes one text block)."""
    content = message["content"]
    if isinstance(content, str):
        return [text_block(content)]
    return content


def tool_uses(message: Message) -> list[ToolUseBlock]:
    content = message["content"]
    if isinstance(content, str):
        return []
    return [b for b in content if b["type"] == "tool_use"]


def message_text(message: Message) -> str:
    """Concatenated text of the text blocks (and tool results) of a message."""
    content = message["content"]
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if block["type"] == "text":
            parts.append(block["text"])
        elif block["type"] == "tool_result":
            parts.append(tool_result_text(block))
    return "\n".join(parts)


def tool_result_text(block: ToolResultBlock) -> str:
    content = block["content"]
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content if part.get("type") == "text")


def assistant_text(message: Message) -> str:
    """Only the text blocks of an assistant message, the way a final report is read."""
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] for b in content if b["type"] == "text")


@dataclass(kw_only=True, slots=True)
class Usage:
    """Token usage of one response, or a running total over many."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    @property
    def total(self) -> int:
        """All four counters: what ``totalTokens`` reports for an agent."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
        )

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_creation_input_tokens += other.cache_creation_input_tokens
        self.cache_read_input_tokens += other.cache_read_input_tokens

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Usage:
        if not data:
            return cls()
        return cls(
            input_tokens=int(data.get("input_tokens") or 0),
            output_tokens=int(data.get("output_tokens") or 0),
            cache_creation_input_tokens=int(data.get("cache_creation_input_tokens") or 0),
            cache_read_input_tokens=int(data.get("cache_read_input_tokens") or 0),
        )


def usage_of(input_tokens: int, output_tokens: int, cache_creation: int, cache_read: int) -> Usage:
    """``Usage(input_tokens=..., ...)`` with every field set directly: each model call's answer
    builds one, and a class called with keywords packs them into a dict and unpacks it for
    ``__init__`` (~4,000 instructions against ~1,300; docs/performance.md, session 11)."""
    usage: Usage = _new(Usage)
    usage.input_tokens = input_tokens
    usage.output_tokens = output_tokens
    usage.cache_creation_input_tokens = cache_creation
    usage.cache_read_input_tokens = cache_read
    return usage


_new = object.__new__
