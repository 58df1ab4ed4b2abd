"""How Anthropic-shaped requests become chat messages for a small local model, and back.

Small instruction models do not emit native tool calls reliably (unconstrained, the default
Qwen2.5-Coder writes fenced JSON instead). So every reply is one JSON object
``{"name": <tool>, "input": {...}}`` chosen among the request's tools plus a ``reply`` tool that
carries the final answer, and decoding is constrained by a JSON schema built from those tool
schemas (the engine turns it into a grammar). ``parse_reply`` reads that object back and falls
back to a lenient scan (fenced JSON, first JSON object, else plain text) when decoding was not
constrained or was cut off.

Rendering is prefix-stable: message *i* renders from messages ``<= i`` only, and tool-use ids are
not rendered, so a fork that shares its parent's history shares its parent's prompt tokens and
the engine's prompt cache serves them.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from subagents.messages import ContentBlock, Message, tool_result_text
from subagents.models.base import ToolSchema

REPLY_TOOL = "reply"
_REPLY_DESCRIPTION = "Give your final answer to the user and end your turn."
_REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
}
_MAX_REF_DEPTH = 8
_AFTER_RESULTS = (
    "(Use these results. Call another tool only if something is still missing; "
    "otherwise call {reply} with your final answer.)"
)


def reply_tool_name(tools: Sequence[ToolSchema]) -> str:
    """``reply``, unless a real tool already has that name."""
    names = {tool.name for tool in tools}
    name = REPLY_TOOL
    while name in names:
        name = f"{name}_to_user"
    return name


def render_system(system: str, tools: Sequence[ToolSchema]) -> str:
    """The system prompt plus the tool list and the one-JSON-object answer format."""
    if not tools:
        return system
    reply = reply_tool_name(tools)
    lines = [
        system.rstrip(),
        "",
        "# Tools",
        "You act by calling exactly one tool per answer. Answer with one JSON object and nothing "
        'else: {"name": "<tool name>", "input": {<arguments>}}.',
        f'When the task is done, call "{reply}" with {{"text": "<your final answer>"}}. '
        "Tool results come back in the next user message.",
        "",
        "Available tools:",
    ]
    for tool in [*tools, ToolSchema(name=reply, description=_REPLY_DESCRIPTION, input_schema={})]:
        schema = _REPLY_SCHEMA if tool.name == reply else inline_refs(tool.input_schema)
        lines.append(f"- {tool.name}: {summary_paragraph(tool.description)}")
        lines.append(f"  input schema: {json.dumps(schema, separators=(',', ':'))}")
    return "\n".join(lines).lstrip()


def summary_paragraph(description: str) -> str:
    """A tool description's first paragraph. Descriptions open with a self-contained summary
    (``tools/descriptions.py``); a 16k-token window on a 2-core CPU cannot afford the rest for
    every tool on every request, and the input schema's field descriptions still come along."""
    return description.split("\n\n", 1)[0].strip()


def render_messages(
    system: str, messages: Sequence[Message], tools: Sequence[ToolSchema]
) -> list[dict[str, str]]:
    """OpenAI-style chat messages (``role``/``content`` strings) for the engine's chat template."""
    reply = reply_tool_name(tools) if tools else None
    names: dict[str, str] = {}
    chat = [{"role": "system", "content": render_system(system, tools)}]
    for message in messages:
        content = message["content"]
        blocks: list[ContentBlock] = (
            [{"type": "text", "text": content}] if isinstance(content, str) else content
        )
        if message["role"] == "assistant":
            text = _render_assistant(blocks, reply, names)
        else:
            text = _render_user(blocks, reply, names)
        chat.append({"role": message["role"], "content": text})
    return chat


def _render_assistant(
    blocks: Sequence[ContentBlock], reply: str | None, names: dict[str, str]
) -> str:
    parts: list[str] = []
    texts = [b["text"] for b in blocks if b["type"] == "text" and b["text"].strip()]
    calls = [b for b in blocks if b["type"] == "tool_use"]
    if texts and (reply is None or not calls):
        joined = "\n".join(texts)
        parts.append(joined if reply is None else _call_json(reply, {"text": joined}))
    for call in calls:
        names[call["id"]] = call["name"]
        parts.append(_call_json(call["name"], call["input"]))
    return "\n".join(parts)


def _render_user(blocks: Sequence[ContentBlock], reply: str | None, names: dict[str, str]) -> str:
    parts: list[str] = []
    for block in blocks:
        if block["type"] == "text":
            parts.append(block["text"])
        elif block["type"] == "tool_result":
            name = names.get(block["tool_use_id"], "tool")
            label = "error from" if block.get("is_error") else "result of"
            parts.append(f"[{label} {name}]\n{tool_result_text(block)}")
    if any(block["type"] == "tool_result" for block in blocks):
        parts.append(_AFTER_RESULTS.format(reply=reply or REPLY_TOOL))
    return "\n\n".join(parts)


def _call_json(name: str, arguments: dict[str, Any]) -> str:
    return json.dumps({"name": name, "input": arguments}, ensure_ascii=False)


# --- the constraint ------------------------------------------------------------------------------


def call_schema(tools: Sequence[ToolSchema], *, reply_only: bool = False) -> dict[str, Any]:
    """A JSON schema every allowed answer satisfies: one of the tools, or the reply tool."""
    options = [] if reply_only else [_option(t.name, inline_refs(t.input_schema)) for t in tools]
    options.append(_option(reply_tool_name(tools), _REPLY_SCHEMA))
    return {"oneOf": options}


def is_stuck_repeat(messages: Sequence[Message], name: str, arguments: dict[str, Any]) -> bool:
    """Whether calling ``name(arguments)`` now would be the third identical call in a row.

    Small models often re-issue the call they just made instead of answering. Polling is a
    legitimate repeat, so only two earlier identical calls that also got identical results (the
    world did not change) count as stuck.
    """
    seen: list[str] = []
    index = len(messages) - 1
    while len(seen) < 2:
        if index < 1:
            return False
        call, result = messages[index - 1], messages[index]
        if call["role"] != "assistant" or result["role"] != "user":
            return False
        uses = [b for b in _blocks(call) if b["type"] == "tool_use"]
        results = [b for b in _blocks(result) if b["type"] == "tool_result"]
        if len(uses) != 1 or len(results) != 1:
            return False
        if uses[0]["name"] != name or uses[0]["input"] != arguments:
            return False
        seen.append(tool_result_text(results[0]))
        index -= 2
    return len(seen) == 2 and seen[0] == seen[1]


def _blocks(message: Message) -> list[ContentBlock]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _option(name: str, input_schema: dict[str, Any]) -> dict[str, Any]:
    body = dict(input_schema) if input_schema else {"type": "object"}
    body.setdefault("type", "object")
    return {
        "type": "object",
        "properties": {"name": {"const": name}, "input": body},
        "required": ["name", "input"],
        "additionalProperties": False,
    }


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with local ``#/$defs/...`` references replaced by their targets.

    Each tool's schema is embedded inside a larger one, where its own root-relative references
    would point at the wrong root. Recursive definitions stop at a permissive ``{}``.
    """
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    resolved = _inline(schema, defs, 0)
    assert isinstance(resolved, dict)
    resolved.pop("$defs", None)
    resolved.pop("definitions", None)
    return resolved


def _inline(node: Any, defs: dict[str, Any], depth: int) -> Any:
    if isinstance(node, list):
        return [_inline(item, defs, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.rsplit("/", 1)[-1] in defs:
        if depth >= _MAX_REF_DEPTH:
            return {}
        target = _inline(defs[ref.rsplit("/", 1)[-1]], defs, depth + 1)
        extra = {k: _inline(v, defs, depth) for k, v in node.items() if k != "$ref"}
        return {**target, **extra}
    return {
        key: _inline(value, defs, depth)
        for key, value in node.items()
        if key not in ("$defs", "definitions")
    }


# --- reading the answer back ---------------------------------------------------------------------


@dataclass(kw_only=True, frozen=True, slots=True)
class ParsedReply:
    """What the model said: a final ``text``, or a tool call (``tool_name`` and ``tool_input``)."""

    text: str | None = None
    tool_name: str | None = None
    tool_input: dict[str, Any] | None = None

    def content(self) -> list[ContentBlock]:
        """Anthropic content blocks: one text block, or one ``tool_use`` block."""
        if self.tool_name is not None:
            return [
                {
                    "type": "tool_use",
                    "id": f"toolu_local_{uuid.uuid4().hex[:20]}",
                    "name": self.tool_name,
                    "input": self.tool_input or {},
                }
            ]
        return [{"type": "text", "text": self.text or ""}]


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
_ARGUMENT_KEYS = ("input", "arguments", "parameters", "args")


def parse_reply(raw: str, tools: Sequence[ToolSchema]) -> ParsedReply:
    """Read a constrained answer, or leniently an unconstrained one; never raises."""
    reply = reply_tool_name(tools)
    for candidate in _json_candidates(raw):
        parsed = _as_call(candidate, reply)
        if parsed is not None:
            return parsed
    cut = _truncated_reply_text(raw, reply)
    return ParsedReply(text=cut if cut is not None else raw.strip())


def _truncated_reply_text(raw: str, reply: str) -> str | None:
    """The text of a final answer cut off by the token limit, as far as it got."""
    head = re.match(
        r'\s*\{\s*"name"\s*:\s*"' + re.escape(reply) + r'"\s*,\s*"input"\s*:\s*\{\s*"text"\s*:\s*"',
        raw,
    )
    if head is None:
        return None
    body = raw[head.end() :]
    for end in range(len(body), max(-1, len(body) - 8), -1):
        try:
            text = json.loads('"' + body[:end] + '"')
        except ValueError:
            continue
        return str(text)
    return None


def _json_candidates(raw: str) -> list[Any]:
    """The whole text as JSON, then fenced blocks, then every decodable object in the text."""
    found: list[Any] = []
    texts = [raw.strip(), *(m.group(1).strip() for m in _FENCE.finditer(raw))]
    for text in texts:
        try:
            found.append(json.loads(text))
        except ValueError:
            continue
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", raw):
        try:
            value, _end = decoder.raw_decode(raw, match.start())
        except ValueError:
            continue
        found.append(value)
    return found


def _as_call(value: Any, reply: str) -> ParsedReply | None:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    arguments: Any = next((value[k] for k in _ARGUMENT_KEYS if k in value), {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = {"text": arguments}
    if not isinstance(arguments, dict):
        return None
    if value["name"] == reply:
        text = arguments.get("text", "")
        return ParsedReply(text=text if isinstance(text, str) else json.dumps(text))
    return ParsedReply(tool_name=value["name"], tool_input=arguments)
