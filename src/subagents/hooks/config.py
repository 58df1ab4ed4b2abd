"""The ``hooks`` block of Claude Code settings (and of agent frontmatter), validated.

Shape (SPEC §12, §19)::

    {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "...",
                                                  "if": "Bash(git push *)", "timeout": 30}]}]}

``parse_hooks`` turns one such block into a ``HookConfig``; the blocks of several settings files
(user, project, local) and of an agent's frontmatter combine with ``HookConfig.merged``, which
keeps every group — Claude Code runs the hooks of all sources, it does not override by source.

What is tolerated and what is fatal follows one rule: **what we do not run is a warning; a hook
we would run but cannot read refuses to start**, because running without a security hook the
user configured would be worse than not running at all.

* warnings (the rest still loads): an event we do not fire (``Notification``,
  ``Setup``, a typo), *whatever its value*; handler types other than
  ``command`` (``prompt``, ``agent``, ``http``, ``mcp_tool``, unknown ones); fields we do not use
  (``async``, ``statusMessage``, ``once``, ``shell``); a bad ``timeout`` (the default is used);
  an ``if`` that is not a permission rule (the hook then runs for every call, as in Claude
  Code); an ``if`` on an event without tool calls (that handler never runs, as in Claude Code);
* ``HookConfigError`` naming the source and the JSON path: for an event we fire, a value that is
  not a list, a group without a ``hooks`` list, a matcher that is not text or not a valid
  regex, a handler without ``type``, a command handler without ``command``.

A handler with ``args`` is Claude Code's exec form: ``command`` and each argument are run as one
word each (quoted for ``/bin/sh``), with ``${CLAUDE_PROJECT_DIR}`` substituted as plain text.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from subagents.hooks.matchers import (
    TOOL_EVENTS,
    IfCondition,
    Matcher,
    ToolCall,
    compile_condition,
    compile_matcher,
)
from subagents.settings import Settings

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
    "UserPromptSubmit",
    "WorktreeCreate",
    "WorktreeRemove",
    "PreCompact",
    "PostCompact",
)
"""The events this runtime fires, with Claude Code's names."""

DEFAULT_TIMEOUT_S: Final = 600.0
"""Claude Code's default per-command timeout."""

CLAUDE_CODE_ONLY_EVENTS: Final = frozenset(
    {
        "Notification",
        "PermissionRequest",
        "PermissionDenied",
        "Setup",
        "ConfigChange",
        "InstructionsLoaded",
        "Elicitation",
        "ElicitationResult",
        "CwdChanged",
        "FileChanged",
        "MessageDisplay",
        "PostToolBatch",
        "StopFailure",
        "TaskCompleted",
    }
)
"""Claude Code events this runtime does not fire (their hooks are left out with a warning)."""

_OTHER_HOOK_TYPES: Final = frozenset({"prompt", "agent", "http", "mcp_tool"})
_UNUSED_HANDLER_FIELDS: Final = frozenset(
    {"async", "asyncRewake", "statusMessage", "once", "shell", "model"}
)
_HANDLER_FIELDS: Final = frozenset({"type", "command", "args", "timeout", "if"})
_PROJECT_DIR: Final = re.compile(r"\$\{CLAUDE_PROJECT_DIR\}")

HookCallback = Callable[[Mapping[str, Any]], Awaitable[Mapping[str, Any]]]
"""An in-process hook: the hook input JSON in, the hook output JSON out."""


class HookConfigError(ValueError):
    """A malformed hooks block; the message names the source and the path inside it."""


@dataclass(kw_only=True, frozen=True, slots=True)
class HookCommand:
    """One command hook: run ``command`` with ``/bin/sh -c``, killed after ``timeout`` seconds."""

    command: str
    timeout: float = DEFAULT_TIMEOUT_S
    source: str = ""
    """Where it was configured (a settings file, an agent definition), for warnings."""
    condition: IfCondition | None = None
    """The handler's ``if``: the hook runs only for tool calls matching it."""
    callback: HookCallback | None = None
    """Instead of a shell command: an in-process callable given the same JSON input, whose
    answer is read as a command hook's stdout JSON (an SDK hook over the control protocol).
    ``command`` then only names it (and keeps identical callbacks from running twice)."""
    blocks_on_failure: bool = False
    """A callback that fails blocks (exit 2) instead of being a non-blocking error."""


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

    def commands_for(
        self, event: str, subject: str | None, call: ToolCall | None = None
    ) -> list[HookCommand]:
        """The commands to run, in config order; an identical command line runs once.

        ``call`` is the tool call of a tool event, which handlers' ``if`` conditions test; a
        handler with an ``if`` never runs without one."""
        seen: set[str] = set()
        found: list[HookCommand] = []
        for group in self.events.get(event, ()):
            if not group.matcher.matches(subject):
                continue
            for command in group.commands:
                if command.condition is not None and not command.condition.holds(call):
                    continue
                if command.command not in seen:
                    seen.add(command.command)
                    found.append(command)
        return found


EMPTY_CONFIG: Final = HookConfig()


def config_from_settings(settings: Settings) -> HookConfig | None:
    """Every settings file's hooks, validated file by file and merged in file order (``None``
    when no file has any); ``HookConfigError`` names the file of a malformed one."""
    merged: HookConfig | None = None
    for path, raw in settings.hook_blocks:
        config = parse_hooks(raw, str(path))
        merged = config if merged is None else merged.merged(config)
    return merged


def parse_hooks(raw: Any, source: str) -> HookConfig:
    """Validate the *value* of a ``hooks`` key; ``source`` (a path) prefixes every message."""
    if raw is None:
        return EMPTY_CONFIG
    if not isinstance(raw, Mapping):
        raise HookConfigError(f"{source}: hooks: expected an object of event names")
    events: dict[str, tuple[MatcherGroup, ...]] = {}
    parser = _Parser(source)
    for event, value in raw.items():
        event = str(event)
        if event not in HOOK_EVENTS:
            parser.warn(f"hooks.{event}", _unknown_event(event))
            continue
        groups = parser.event(event, value)
        if groups:
            events[event] = groups
    return HookConfig(events=events, warnings=tuple(parser.warnings))


def _unknown_event(event: str) -> str:
    if event in CLAUDE_CODE_ONLY_EVENTS:
        return "a Claude Code hook event this runtime does not fire; its hooks are ignored"
    close = next((known for known in HOOK_EVENTS if known.lower() == event.lower()), None)
    hint = f" (did you mean {close!r}?)" if close else ""
    return f"unknown hook event{hint}; its hooks are ignored"


@dataclass
class _Parser:
    """Collects the warnings of one settings source while its hooks are read."""

    source: str
    warnings: list[str] = field(default_factory=list)

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(f"{self.source}: {path}: {message}")

    def fail(self, path: str, message: str) -> HookConfigError:
        return HookConfigError(f"{self.source}: {path}: {message}")

    def event(self, event: str, value: Any) -> tuple[MatcherGroup, ...]:
        if not isinstance(value, list):
            kind = type(value).__name__
            raise self.fail(f"hooks.{event}", f"expected a list of matcher groups, not {kind}")
        groups = []
        for index, group in enumerate(value):
            parsed = self.group(event, f"hooks.{event}[{index}]", group)
            if parsed is not None:
                groups.append(parsed)
        return tuple(groups)

    def group(self, event: str, path: str, group: Any) -> MatcherGroup | None:
        if not isinstance(group, Mapping):
            raise self.fail(path, 'expected an object {"matcher": ..., "hooks": [...]}')
        matcher = group.get("matcher")
        if matcher is not None and not isinstance(matcher, str):
            raise self.fail(f"{path}.matcher", "must be text (a tool name, a list or a regex)")
        try:
            compiled = compile_matcher(matcher)
        except ValueError as exc:
            raise self.fail(f"{path}.matcher", str(exc)) from None
        handlers = group.get("hooks")
        if not isinstance(handlers, list):
            raise self.fail(f"{path}.hooks", "field required: a list of hook handlers")
        for key in group:
            if key not in ("matcher", "hooks"):
                where = " (`if` belongs on each handler)" if key == "if" else ""
                self.warn(f"{path}.{key}", f"unknown field, ignored{where}")
        commands = tuple(
            command
            for index, handler in enumerate(handlers)
            if (command := self.handler(event, f"{path}.hooks[{index}]", handler)) is not None
        )
        return MatcherGroup(matcher=compiled, commands=commands) if commands else None

    def handler(self, event: str, path: str, handler: Any) -> HookCommand | None:
        if not isinstance(handler, Mapping):
            raise self.fail(path, 'expected an object {"type": "command", "command": ...}')
        kind = handler.get("type")
        if kind is None:
            raise self.fail(f"{path}.type", "field required")
        if not isinstance(kind, str):
            raise self.fail(f"{path}.type", 'must be text such as "command"')
        if kind != "command":
            known = kind in _OTHER_HOOK_TYPES
            what = "is not supported here" if known else "is unknown"
            self.warn(f"{path}.type", f"hook type {kind!r} {what}; this hook is ignored")
            return None
        command = self.command_line(path, handler)
        for key in handler:
            if key not in _HANDLER_FIELDS:
                note = "not used by this runtime" if key in _UNUSED_HANDLER_FIELDS else "unknown"
                self.warn(f"{path}.{key}", f"field {note}, ignored")
        return HookCommand(
            command=command,
            timeout=self.timeout(path, handler.get("timeout")),
            source=self.source,
            condition=self.condition(event, path, handler.get("if")),
        )

    def command_line(self, path: str, handler: Mapping[str, Any]) -> str:
        command = handler.get("command")
        if not isinstance(command, str) or not command.strip():
            raise self.fail(f"{path}.command", "field required: the command line to run")
        args = handler.get("args")
        if args is None:
            return command
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise self.fail(f"{path}.args", "must be a list of strings")
        return " ".join(_exec_word(word) for word in [command, *args])

    def timeout(self, path: str, value: Any) -> float:
        if value is None:
            return DEFAULT_TIMEOUT_S
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            seconds = None
        else:
            try:
                seconds = float(value)
            except ValueError:
                seconds = None
        if seconds is None or not 0 < seconds < float("inf"):
            self.warn(
                f"{path}.timeout",
                f"{value!r} is not a positive number of seconds; "
                f"the default {DEFAULT_TIMEOUT_S:g} s is used",
            )
            return DEFAULT_TIMEOUT_S
        return seconds

    def condition(self, event: str, path: str, value: Any) -> IfCondition | None:
        if value is None:
            return None
        if not isinstance(value, str):
            self.warn(
                f"{path}.if", "must be one permission rule as text; the hook runs for every call"
            )
            return IfCondition(source=str(value), valid=False)
        if event not in TOOL_EVENTS:
            self.warn(
                f"{path}.if",
                f"{event} has no tool call to test, so this hook never runs (as in Claude Code)",
            )
        condition, problem = compile_condition(value)
        if problem is not None:
            self.warn(f"{path}.if", problem)
        return condition


def _exec_word(word: str) -> str:
    """One exec-form word for ``/bin/sh``: quoted, with ``${CLAUDE_PROJECT_DIR}`` expanded."""
    import shlex  # here: only exec-form hooks need it, not every start-up

    parts = _PROJECT_DIR.split(word)
    quoted = [shlex.quote(part) if part else "" for part in parts]
    return '"$CLAUDE_PROJECT_DIR"'.join(quoted) or "''"
