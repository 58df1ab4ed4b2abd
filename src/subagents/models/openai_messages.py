"""Our Anthropic-shaped history as chat-completions messages (the mapping is in ``openai.py``'s
docstring), and ``HistoryConversions``: each agent's messages converted once, not on every call.

Why: an agent's history only grows, yet converting all of it was ~15 % of an OpenAI-compatible
model call on the bench (tool arguments re-encoded each time). Why it is safe: the history is the
agent's live list, which providers must not change but others may (compaction replaces it;
a message could be edited in place). So a converted message is reused only when the same object
sits at the same index *and* still equals a structural copy taken when it was converted (dicts
and lists copied, strings shared, so the comparison of an unchanged message is mostly identity
checks in C); anything else is converted again and the rest of that agent's cache dropped.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from subagents.messages import ContentBlock, Message, blocks_of, tool_result_text

MAX_AGENTS = 256
"""Histories kept (least recently used dropped): a fan-out's concurrent children fit."""


def to_openai_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Our history as chat-completions messages (see the module docstring for the mapping)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        out.extend(convert_message(message))
    return out


def _assistant_message(blocks: list[ContentBlock]) -> dict[str, Any]:
    text = "\n".join(b["text"] for b in blocks if b["type"] == "text" and b["text"])
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": json.dumps(b["input"])},
        }
        for b in blocks
        if b["type"] == "tool_use"
    ]
    converted: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        converted["tool_calls"] = calls
    elif not text:
        converted["content"] = ""
    return converted


def _user_messages(message: Message) -> list[dict[str, Any]]:
    if isinstance(message["content"], str):
        return [{"role": "user", "content": message["content"]}]
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    for block in message["content"]:
        if block["type"] == "tool_result":
            content = tool_result_text(block)
            if block.get("is_error"):
                content = f"Error: {content}"
            out.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": content})
        elif block["type"] == "text":
            texts.append(block["text"])
    if texts:
        out.append({"role": "user", "content": "\n".join(texts)})
    return out


def convert_message(message: Message) -> list[dict[str, Any]]:
    """One history message as the chat-completions messages it becomes (0, 1 or more)."""
    if message["role"] == "assistant":
        return [_assistant_message(blocks_of(message))]
    return _user_messages(message)


def structural_copy(value: Any) -> Any:
    """``value`` with every dict and list copied and every other value shared: equal to
    ``value`` until someone changes ``value`` in place (one call per container, not per value)."""
    if type(value) is dict:
        return {
            k: v if type(v) not in _CONTAINERS else structural_copy(v) for k, v in value.items()
        }
    if type(value) is list:
        return [v if type(v) not in _CONTAINERS else structural_copy(v) for v in value]
    return value


_CONTAINERS = (dict, list)


@dataclass(slots=True)
class _Converted:
    message: Message
    snapshot: Message
    converted: list[dict[str, Any]]


class HistoryConversions:
    """Per agent, the converted form of each message of its history (module docstring)."""

    def __init__(self, max_agents: int = MAX_AGENTS) -> None:
        self.max_agents = max_agents
        self._agents: OrderedDict[str, list[_Converted]] = OrderedDict()

    def convert(
        self, agent_id: str, system: str, messages: Sequence[Message]
    ) -> list[dict[str, Any]]:
        """``to_openai_messages(system, messages)``, reusing what is still valid."""
        entries = self._entries(agent_id)
        out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        for index, message in enumerate(messages):
            if index < len(entries):
                entry = entries[index]
                if entry.message is message and message == entry.snapshot:
                    out.extend(entry.converted)
                    continue
                del entries[index:]  # changed or replaced: everything after it is suspect too
            converted = convert_message(message)
            entries.append(_Converted(message, structural_copy(message), converted))
            out.extend(converted)
        del entries[len(messages) :]
        return out

    def _entries(self, agent_id: str) -> list[_Converted]:
        entries = self._agents.get(agent_id)
        if entries is not None:
            self._agents.move_to_end(agent_id)
            return entries
        entries = self._agents[agent_id] = []
        if len(self._agents) > self.max_agents:
            self._agents.popitem(last=False)
        return entries
