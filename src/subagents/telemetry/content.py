"""Content that telemetry records only when asked to (privacy by default): prompts, model
output, tool inputs and results — in the GenAI conventions' message shapes, capped in size."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from subagents.messages import Message

MAX_CHARS = 16_000
"""Longest content attribute; a span is no place for a 1 MB tool result."""

CONTENT_KEYS = frozenset({"message"})
"""Record attributes that quote a call (permission messages): kept only with tool details."""


def capped(text: str) -> str:
    if len(text) <= MAX_CHARS:
        return text
    return f"{text[:MAX_CHARS]}… [{len(text) - MAX_CHARS} more characters]"


def as_json(value: Any) -> str:
    return capped(json.dumps(value, ensure_ascii=False, default=str))


def input_messages(prompt: str) -> str:
    """An agent's task as ``gen_ai.input.messages``."""
    return as_json([{"role": "user", "parts": [{"type": "text", "content": prompt}]}])


def output_messages(message: Message, finish_reason: str) -> str:
    """One assistant message as ``gen_ai.output.messages`` (text and tool calls)."""
    content = message["content"]
    parts: list[dict[str, Any]] = []
    if isinstance(content, str):
        parts.append({"type": "text", "content": content})
        content = []
    for block in content:
        if block["type"] == "text":
            parts.append({"type": "text", "content": block["text"]})
        elif block["type"] == "tool_use":
            parts.append(
                {
                    "type": "tool_call",
                    "id": block["id"],
                    "name": block["name"],
                    "arguments": block["input"],
                }
            )
    return as_json([{"role": "assistant", "parts": parts, "finish_reason": finish_reason}])


def scalar_fields(data: Mapping[str, Any]) -> dict[str, str | bool | int | float]:
    """The fields of an event that an attribute can hold (nested values are left out)."""
    return {
        key: capped(value) if isinstance(value, str) else value
        for key, value in data.items()
        if isinstance(value, str | bool | int | float)
    }
