"""Our Anthropic-shaped history as chat-completions messages (the mapping is in ``openai.py``'s
docstring), and ``HistoryConversions``: each agent's messages converted once, not on every call.

Why: an agent's history only grows, yet converting all of it was ~15 % of an OpenAI-compatible
model call on the bench (tool arguments re-encoded each time). Why it is safe: the history is the
agent's live list, which providers must not change but others may (compaction replaces it;
a message could be edited in place). So a converted message is reused only when the same object
sits at the same index *and* still equals a deep copy taken when it was converted (``snapshot``:
an ``orjson`` round trip); anything else is converted again and the rest of that agent's cache
dropped. When nothing changed — every call but the first after an edit — the check is two
C-level passes over the history (identity, then equality), and the converted messages are kept
flat, so a call converts only the messages appended since the last one.

The lean transport checks and sends differently (``HistoryConversions.encoded``): the check is
the history's JSON, encoded once per call, against the bytes of what was converted, and what
is sent is the converted messages' JSON kept as bytes, so the body does not encode them again.
Both convert a message from its copy, so a message whose JSON is unchanged converts the same.
"""

from __future__ import annotations

import json
import operator
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

import orjson

from subagents.messages import ContentBlock, Message, blocks_of, tool_result_text

MAX_AGENTS = 256
"""Histories kept (least recently used dropped): a fan-out's concurrent children fit."""


def to_openai_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Our history as chat-completions messages (see the module docstring for the mapping)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        out.extend(convert_message(message))
    return out


def _assistant_message(
    blocks: list[ContentBlock], arguments: Callable[[Any], str] = json.dumps
) -> dict[str, Any]:
    # One pass, no generator: this runs for every new assistant message of every agent.
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for b in blocks:
        if b["type"] == "text":
            if b["text"]:
                texts.append(b["text"])
        elif b["type"] == "tool_use":
            function = {"name": b["name"], "arguments": arguments(b["input"])}
            calls.append({"id": b["id"], "type": "function", "function": function})
    text = texts[0] if len(texts) == 1 else "\n".join(texts)
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


def convert_copy(message: Message) -> list[dict[str, Any]]:
    """``convert_message`` of a message's ``snapshot``, which holds no cycle: its tool inputs
    written by one ``json`` encoder made once (``json.dumps`` makes one per call, with a
    circular-reference check, three times the cost of the writing), the same text."""
    if message["role"] == "assistant":
        return [_assistant_message(blocks_of(message), _acyclic_json)]
    return _user_messages(message)


def _acyclic_json(value: Any) -> str:
    """``json.dumps(value)`` for a value without cycles."""
    if _ENCODER is None or type(value) is str:
        return json.dumps(value)
    return "".join(_ENCODER(value, 0))


# ``json.dumps``'s own encoder with its default settings (``JSONEncoder.iterencode``), minus
# the circular-reference check a snapshot does not need.
_ENCODER = (
    None
    if c_make_encoder is None
    else c_make_encoder(
        None,
        json.JSONEncoder().default,
        encode_basestring_ascii,
        None,
        ": ",
        ", ",
        False,
        False,
        True,
    )
)


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


def snapshot(message: Message) -> Any:
    """A deep copy of ``message`` that stays equal to it until it is changed in place. A JSON
    round trip through ``orjson`` does it in C (a message is JSON); what orjson cannot encode
    gets the structural copy, and what it encodes differently (a tuple becomes a list) only
    makes the comparison fail, so that message is converted again: never a stale reuse."""
    try:
        return orjson.loads(orjson.dumps(message))
    except TypeError:  # orjson.JSONEncodeError is one
        return structural_copy(message)


@dataclass(slots=True)
class _Agent:
    """One agent's converted history: ``messages[i]`` converted to ``converted[ends[i-1]:
    ends[i]]``, valid while that object is still at ``i`` and equals ``snapshots[i]``."""

    messages: list[Message] = field(default_factory=list)
    snapshots: list[Any] = field(default_factory=list)
    converted: list[dict[str, Any]] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    source: bytes = b"["
    """The lean transport's check (``HistoryConversions.encoded``): ``orjson.dumps`` of the
    first ``encoded_count`` messages as a list, without its closing bracket."""
    encoded: bytes = b""
    """Those messages' chat-completions messages, each ``orjson.dumps``-ed, joined by commas."""
    encoded_count: int = 0
    system: str = ""
    """The system prompt ``head`` was written for."""
    head: bytes = b"["
    """The JSON array's opening: ``[``, and the system message with its comma when there is
    one (an agent's system prompt is the same on every call: encoded once)."""

    def valid_prefix(self, messages: list[Message]) -> int:
        """How many of ``messages`` the cache still holds (all of its own, in one C-level
        comparison when nothing changed; else the first that differs)."""
        known = len(self.messages)
        if known <= len(messages):
            head = messages[:known]
            if all(map(operator.is_, self.messages, head)) and self.snapshots == head:
                return known
        for index, (mine, message) in enumerate(zip(self.messages, messages, strict=False)):
            if mine is not message or message != self.snapshots[index]:
                return index
        return min(known, len(messages))

    def truncate(self, keep: int) -> None:
        del self.messages[keep:], self.snapshots[keep:], self.ends[keep:]
        del self.converted[self.ends[-1] if self.ends else 0 :]

    def append(self, message: Message) -> None:
        copy = snapshot(message)
        self.converted += convert_copy(copy)  # from the copy: what ``encoded`` converts
        self.messages.append(message)
        self.snapshots.append(copy)
        self.ends.append(len(self.converted))


class HistoryConversions:
    """Per agent, the converted form of each message of its history (module docstring)."""

    def __init__(self, max_agents: int = MAX_AGENTS) -> None:
        self.max_agents = max_agents
        self._agents: OrderedDict[str, _Agent] = OrderedDict()

    def convert(
        self, agent_id: str, system: str, messages: Sequence[Message]
    ) -> list[dict[str, Any]]:
        """``to_openai_messages(system, messages)``, reusing what is still valid."""
        history = messages if type(messages) is list else list(messages)
        agent = self._agent(agent_id)
        keep = agent.valid_prefix(history)
        if keep < len(agent.messages):
            agent.truncate(keep)  # changed or replaced: everything after it is suspect too
        for message in history[keep:]:
            agent.append(message)
        out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        out += agent.converted
        return out

    def encoded(self, agent_id: str, system: str, messages: Sequence[Message]) -> bytes | None:
        """The JSON of ``convert(agent_id, system, messages)``, as ``orjson.dumps`` writes it,
        for the lean transport; None when orjson cannot encode the history (``convert`` then).

        The check is the history's own JSON: ``orjson.dumps`` of all of it (C, about what the
        Anthropic transport spends encoding its body), compared with the bytes of the messages
        converted so far. Equal bytes are equal JSON, and a message is converted from its JSON
        (``snapshot``, on both transports), so its conversion is still right; the first
        difference anywhere — an edit in place, a replaced or shortened history — has every
        message converted again. What this saves over ``convert``'s check (a deep comparison
        with copies) is the comparison, the copies, and encoding the converted history again
        in the body: it is spliced in as these bytes."""
        history = messages if type(messages) is list else list(messages)
        try:
            now = orjson.dumps(history)
        except TypeError:  # orjson.JSONEncodeError is one
            return None
        agent = self._agent(agent_id)
        count, source = agent.encoded_count, agent.source
        if count:
            size = len(source)
            after = now[size : size + 1]
            # (``after``: a message is a dict, and no dict's JSON begins another one's; the
            # check is for what else a history could hold, a number beginning another)
            if count > len(history) or (after != b"," and after != b"]") or now[:size] != source:
                count, agent.encoded = 0, b""
        if count < len(history):
            # The new messages' JSON is the end of ``now``: read back at once, their copies.
            start = len(source) + 1 if count else 1
            converted: list[dict[str, Any]] = []
            for copy in orjson.loads(b"[" + now[start:]):
                converted += convert_copy(copy)
            if converted:
                new = orjson.dumps(converted)[1:-1]
                agent.encoded = agent.encoded + b"," + new if agent.encoded else new
        agent.source, agent.encoded_count = now[:-1], len(history)
        if system != agent.system:
            agent.system = system
            agent.head = (
                b'[{"role":"system","content":' + orjson.dumps(system) + b"}," if system else b"["
            )
        if not agent.encoded:
            return agent.head[:-1] + b"]" if system else b"[]"
        return agent.head + agent.encoded + b"]"

    def _agent(self, agent_id: str) -> _Agent:
        agent = self._agents.get(agent_id)
        if agent is not None:
            self._agents.move_to_end(agent_id)
            return agent
        agent = self._agents[agent_id] = _Agent()
        if len(self._agents) > self.max_agents:
            self._agents.popitem(last=False)
        return agent
