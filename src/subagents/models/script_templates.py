"""Templates in scripted turns: ``{{tool_results}}``, ``{{capture.NAME}}`` and friends.

Templates are parsed once, when the script loads, into literal parts and placeholders, so that
serving a turn costs a join (or nothing, for the common text without placeholders). The values a
template may need from the request (the last user message's text, its tool results) are computed
lazily by ``RenderContext`` and at most once per call, because most turns need none of them.

Resolution rules (SPEC §19): unknown placeholder names are left as written; so is a placeholder
whose value does not exist (``{{tool_results.7}}`` with two results, a capture not taken yet),
which keeps the script's mistake visible in the output. A ``match`` group that exists but did not
take part in the match renders as the empty string, as ``re`` reports it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from subagents.messages import Message, message_text, tool_result_text

_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_]+)(?:\.([A-Za-z0-9_]+))?\s*\}\}")
_BARE = frozenset({"last_user", "prompt", "agent_id"})


class RenderContext:
    """What a template can refer to during one call; request-derived values are lazy."""

    __slots__ = (
        "_last_user",
        "_results",
        "agent_id",
        "captures",
        "match_groups",
        "messages",
        "prompt",
    )

    agent_id: str
    prompt: str
    messages: list[Message]
    match_groups: tuple[str | None, ...]
    captures: dict[str, str]

    def __init__(
        self,
        *,
        agent_id: str,
        prompt: str,
        messages: list[Message],
        match_groups: tuple[str | None, ...],
        captures: dict[str, str],
    ) -> None:
        self.agent_id = agent_id
        self.prompt = prompt
        self.messages = messages
        self.match_groups = match_groups
        self.captures = captures
        self._last_user: str | None = None
        self._results: list[str] | None = None

    def last_user_message(self) -> Message | None:
        messages = self.messages
        for index in range(len(messages) - 1, -1, -1):
            if messages[index]["role"] == "user":
                return messages[index]
        return None

    @property
    def last_user(self) -> str:
        """The whole text of the last user message: its text blocks and tool results."""
        if self._last_user is None:
            message = self.last_user_message()
            self._last_user = "" if message is None else message_text(message)
        return self._last_user

    @property
    def tool_results(self) -> list[str]:
        """Texts of the last user message's tool results, in call order."""
        if self._results is None:
            message = self.last_user_message()
            content = None if message is None else message["content"]
            self._results = (
                [tool_result_text(b) for b in content if b["type"] == "tool_result"]
                if isinstance(content, list)
                else []
            )
        return self._results


@dataclass(frozen=True, slots=True)
class _Slot:
    """A placeholder: ``kind`` plus optional argument, and its source text for fallback."""

    kind: str
    arg: str | None
    source: str

    def value(self, ctx: RenderContext) -> str:
        result = self._lookup(ctx)
        return self.source if result is None else result

    def _lookup(self, ctx: RenderContext) -> str | None:
        kind, arg = self.kind, self.arg
        if kind == "tool_results":
            results = ctx.tool_results
            if arg is None:
                return "\n".join(results)
            index = int(arg)
            return results[index] if index < len(results) else None
        if kind == "capture":
            return ctx.captures.get(arg or "")
        if kind == "match":
            index = int(arg or 0)
            if index >= len(ctx.match_groups):
                return None
            return ctx.match_groups[index] or ""
        if kind == "prompt":
            return ctx.prompt
        if kind == "agent_id":
            return ctx.agent_id
        return ctx.last_user


def _slot_for(match: re.Match[str]) -> _Slot | None:
    kind, arg = match.group(1), match.group(2)
    known = (
        (kind in _BARE and arg is None)
        or (kind == "tool_results" and (arg is None or arg.isdigit()))
        or (kind == "match" and arg is not None and arg.isdigit())
        or (kind == "capture" and arg is not None)
    )
    return _Slot(kind, arg, match.group(0)) if known else None


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed string: ``parts`` mixes literal text and placeholders."""

    parts: tuple[str | _Slot, ...]

    def render(self, ctx: RenderContext) -> str:
        return "".join(p if isinstance(p, str) else p.value(ctx) for p in self.parts)


def compile_template(text: str) -> str | Template:
    """The text itself when it holds no known placeholder, else a ``Template``."""
    parts: list[str | _Slot] = []
    position = 0
    for found in _PLACEHOLDER.finditer(text):
        slot = _slot_for(found)
        if slot is None:
            continue
        if found.start() > position:
            parts.append(text[position : found.start()])
        parts.append(slot)
        position = found.end()
    if not parts:
        return text
    if position < len(text):
        parts.append(text[position:])
    return Template(tuple(parts))


Renderer = Callable[[RenderContext], Any]


def compile_value(value: Any) -> Renderer | None:
    """A renderer for a JSON value with templates in its strings, or None when it has none."""
    if isinstance(value, str):
        template = compile_template(value)
        return template.render if isinstance(template, Template) else None
    if isinstance(value, dict):
        return _compile_dict(value)
    if isinstance(value, list):
        return _compile_list(value)
    return None


def _compile_dict(value: dict[str, Any]) -> Renderer | None:
    renderers = {key: compile_value(item) for key, item in value.items()}
    if all(r is None for r in renderers.values()):
        return None
    items = [(key, value[key], renderers[key]) for key in value]

    def render(ctx: RenderContext) -> dict[str, Any]:
        return {key: item if r is None else r(ctx) for key, item, r in items}

    return render


def _compile_list(value: list[Any]) -> Renderer | None:
    renderers = [compile_value(item) for item in value]
    if all(r is None for r in renderers):
        return None
    items = list(zip(value, renderers, strict=True))

    def render(ctx: RenderContext) -> list[Any]:
        return [item if r is None else r(ctx) for item, r in items]

    return render
