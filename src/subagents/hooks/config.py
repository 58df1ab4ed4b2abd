"""The ``hooks`` block of Claude Code settings (and of agent frontmatter), validated.

Shape (SPEC §12, §19)::

    {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "...",
                                                  "timeout": 30}]}], ...}

``parse_hooks`` turns one such block into a ``HookConfig``; the blocks of several settings files
(user, project, local) and of an agent's frontmatter combine with ``HookConfig.merged``, which
keeps every group — Claude Code runs the hooks of all sources, it does not override by source.

What is tolerated and what is fatal, and why:

* an event name we do not implement (``UserPromptSubmit``, ``Notification``, a typo) is left out
  with a warning, so a settings file written for a newer Claude Code still loads;
* hook types other than ``command`` that Claude Code knows (``prompt``, ``agent``, ``http``) are
  skipped with a warning for the same reason;
* anything malformed (a missing ``command``, a non-list, a bad regex, a timeout <= 0) raises
  ``HookConfigError`` naming the source file and the JSON path, because silently dropping a
  security hook would be worse than refusing to start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from subagents.hooks.matchers import Matcher, compile_matcher

HOOK_EVENTS: Final = (
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "SubagentStart",
    "SubagentStop",
    "TaskCreated",
    "TeammateIdle",
    "Stop",
    "SessionStart",
    "SessionEnd",
    "WorktreeCreate",
    "WorktreeRemove",
)
"""The events this runtime fires, with Claude Code's names."""

DEFAULT_TIMEOUT_S: Final = 600.0
"""Claude Code's default per-command timeout."""

_OTHER_HOOK_TYPES: Final = frozenset({"prompt", "agent", "http"})


class HookConfigError(ValueError):
    """A malformed hooks block; the message names the source and the path inside it."""


class _HookEntry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str
    command: str | None = None
    timeout: float | None = Field(default=None, gt=0)


class _MatcherGroup(BaseModel):
    model_config = ConfigDict(extra="ignore")

    matcher: str | None = None
    hooks: list[_HookEntry]


_GROUPS = TypeAdapter(list[_MatcherGroup])


@dataclass(kw_only=True, frozen=True, slots=True)
class HookCommand:
    """One command hook: run ``command`` with ``/bin/sh -c``, killed after ``timeout`` seconds."""

    command: str
    timeout: float = DEFAULT_TIMEOUT_S
    source: str = ""
    """Where it was configured (a settings file, an agent definition), for warnings."""


@dataclass(kw_only=True, frozen=True, slots=True)
class MatcherGroup:
    """The commands that run for an event when ``matcher`` accepts the event's subject."""

    matcher: Matcher
    commands: tuple[HookCommand, ...]


@dataclass(kw_only=True, frozen=True, slots=True)
class HookConfig:
    """Every configured group, by event name; ``warnings`` are what parsing left out."""

    events: Mapping[str, tuple[MatcherGroup, ...]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def merged(self, other: HookConfig) -> HookConfig:
        """Both configs' groups (this one's first) and warnings."""
        events = {name: tuple(groups) for name, groups in self.events.items()}
        for name, groups in other.events.items():
            events[name] = events.get(name, ()) + tuple(groups)
        return HookConfig(events=events, warnings=self.warnings + other.warnings)

    def with_stop_as_subagent_stop(self) -> HookConfig:
        """For agent frontmatter: the agent's ``Stop`` is its ``SubagentStop``."""
        stop = self.events.get("Stop", ())
        if not stop:
            return self
        events = {name: groups for name, groups in self.events.items() if name != "Stop"}
        events["SubagentStop"] = tuple(events.get("SubagentStop", ())) + tuple(stop)
        return replace(self, events=events)

    def commands_for(self, event: str, subject: str | None) -> list[HookCommand]:
        """The commands to run, in config order; an identical command line runs once."""
        seen: set[str] = set()
        found: list[HookCommand] = []
        for group in self.events.get(event, ()):
            if not group.matcher.matches(subject):
                continue
            for command in group.commands:
                if command.command not in seen:
                    seen.add(command.command)
                    found.append(command)
        return found


EMPTY_CONFIG: Final = HookConfig()


def parse_hooks(raw: Mapping[str, Any] | None, source: str) -> HookConfig:
    """Validate the *value* of a ``hooks`` key; ``source`` (a path) prefixes every error."""
    if raw is None:
        return EMPTY_CONFIG
    if not isinstance(raw, Mapping):
        raise HookConfigError(f"{source}: hooks: expected an object of event names")
    events: dict[str, tuple[MatcherGroup, ...]] = {}
    warnings: list[str] = []
    for event, value in raw.items():
        if event not in HOOK_EVENTS:
            warnings.append(f"{source}: hooks.{event}: unknown or unsupported hook event, ignored")
            continue
        groups = _parse_event(value, source, event, warnings)
        if groups:
            events[event] = groups
    return HookConfig(events=events, warnings=tuple(warnings))


def _parse_event(
    value: Any, source: str, event: str, warnings: list[str]
) -> tuple[MatcherGroup, ...]:
    try:
        groups = _GROUPS.validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = f"hooks.{event}{_format_loc(first['loc'])}"
        raise HookConfigError(f"{source}: {path}: {_lower_first(first['msg'])}") from None
    parsed: list[MatcherGroup] = []
    for index, group in enumerate(groups):
        path = f"hooks.{event}[{index}]"
        try:
            matcher = compile_matcher(group.matcher)
        except ValueError as exc:
            raise HookConfigError(f"{source}: {path}.matcher: {exc}") from None
        commands = _parse_commands(group.hooks, source, path, warnings)
        if commands:
            parsed.append(MatcherGroup(matcher=matcher, commands=commands))
    return tuple(parsed)


def _parse_commands(
    entries: list[_HookEntry], source: str, path: str, warnings: list[str]
) -> tuple[HookCommand, ...]:
    commands: list[HookCommand] = []
    for index, entry in enumerate(entries):
        where = f"{path}.hooks[{index}]"
        if entry.type in _OTHER_HOOK_TYPES:
            warnings.append(
                f"{source}: {where}: hook type {entry.type!r} is not supported, ignored"
            )
            continue
        if entry.type != "command":
            raise HookConfigError(f"{source}: {where}.type: unknown hook type {entry.type!r}")
        if entry.command is None or not entry.command.strip():
            raise HookConfigError(f"{source}: {where}.command: field required")
        timeout = DEFAULT_TIMEOUT_S if entry.timeout is None else entry.timeout
        commands.append(HookCommand(command=entry.command, timeout=timeout, source=source))
    return tuple(commands)


def _format_loc(loc: tuple[int | str, ...]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]
