"""A script compiled for serving: each turn's texts and tool inputs as templates, its regexes
compiled, its usage as a dict — all once, when the script loads (``models/scripted.py`` serves
them; ``models/script_schema.py`` validates the file they come from)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from subagents.models.base import ErrorKind, ModelError
from subagents.models.script_schema import ErrorSpec, ScriptAgent, ScriptTurn
from subagents.models.script_templates import (
    RenderContext,
    Renderer,
    Template,
    compile_template,
    compile_value,
)
from subagents.models.scripted_cache import json_chars

_ERROR_KINDS: dict[str, tuple[ErrorKind, int | None]] = {
    "overloaded": ("overloaded", 529),
    "rate_limit": ("rate_limit", 429),
    "api_error": ("api_error", 500),
    "fallback": ("fallback", None),
}


@dataclass(kw_only=True, slots=True)
class Call:
    """A compiled tool call of a scripted turn."""

    name: str
    input: dict[str, Any]
    render: Renderer | None
    chars: int


@dataclass(kw_only=True, slots=True)
class Turn:
    """A compiled scripted turn."""

    text: str | Template | None
    calls: tuple[Call, ...]
    delay_s: float
    stream_s: float
    usage: dict[str, int] | None
    error: ErrorSpec | None
    captures: tuple[tuple[str, re.Pattern[str]], ...]
    needs_context: bool


@dataclass(kw_only=True, slots=True)
class Entry:
    """A compiled script entry: which agents it binds and their turns."""

    index: int
    agent_type: str | None
    match: re.Pattern[str] | None
    turns: tuple[Turn, ...]

    def describe(self) -> str:
        kind = self.agent_type or "any type"
        return f"#{self.index} {kind}" + (f" /{self.match.pattern}/" if self.match else "")


def compile_turn(turn: ScriptTurn) -> Turn:
    text = None if turn.text is None else compile_template(turn.text)
    calls = tuple(compile_call(c.name, c.input) for c in turn.tool_calls)
    return Turn(
        text=text,
        calls=calls,
        delay_s=turn.delay_ms / 1000,
        stream_s=turn.stream_ms / 1000,
        usage=None if turn.usage is None else turn.usage.model_dump(),
        error=turn.error,
        captures=tuple((name, re.compile(p)) for name, p in turn.capture.items()),
        needs_context=isinstance(text, Template) or any(c.render for c in calls),
    )


def compile_call(name: str, tool_input: dict[str, Any]) -> Call:
    render = compile_value(tool_input)
    return Call(
        name=name, input=tool_input, render=render, chars=len(name) + json_chars(tool_input)
    )


def compile_entry(index: int, agent: ScriptAgent) -> Entry:
    return Entry(
        index=index,
        agent_type=agent.agent_type,
        match=None if agent.match is None else re.compile(agent.match),
        turns=tuple(compile_turn(t) for t in agent.turns),
    )


def capture(turn: Turn, ctx: RenderContext, captures: dict[str, str]) -> None:
    """Keep the first group (or whole match) of each capture regex found in the last user text."""
    text = ctx.last_user
    for name, pattern in turn.captures:
        found = pattern.search(text)
        if found is not None:
            captures[name] = (found.group(1) if pattern.groups else found.group(0)) or ""


def injected_error(spec: ErrorSpec, failures: int, agent_id: str) -> ModelError:
    """The error a turn's ``error: {type, times}`` makes its ``failures``-th call fail with."""
    kind, status = _ERROR_KINDS[spec.type]
    message = f"scripted {spec.type} error {failures} of {spec.times} for agent {agent_id!r}"
    return ModelError(kind, message, status=status)
