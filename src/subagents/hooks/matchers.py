"""Hook matchers: which hook groups apply to one event occurrence.

Claude Code settings use one ``matcher`` string per group, read three ways (SPEC §12):

* ``"*"``, ``""`` or no matcher at all matches everything;
* a value made only of letters, digits, ``_``, ``-``, ``,``, ``|`` and spaces is an *exact list*:
  it is split on ``|`` and ``,``, each part trimmed, and the subject must equal one part
  (``"Edit|Write"`` matches ``Edit`` but not ``NotebookEdit``);
* anything else is a regular expression tested with ``re.search`` — unanchored, like the
  ``RegExp.test`` Claude Code uses, so ``"mcp__.*"`` or ``"^Notebook"`` keep the meaning they
  have there; write ``^...$`` to anchor.

What the subject is depends on the event: the tool name for tool events, ``agent_type`` for
SubagentStart/SubagentStop, the source/reason for SessionStart/SessionEnd; other events have no
subject and every group applies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

_EXACT_LIST = re.compile(r"[A-Za-z0-9_\-,| ]*")
_SEPARATORS = re.compile(r"[|,]")


@dataclass(kw_only=True, frozen=True, slots=True)
class Matcher:
    """A compiled matcher; ``source`` is the text as written in the settings."""

    source: str
    names: frozenset[str] | None = None
    pattern: re.Pattern[str] | None = None

    def matches(self, subject: str | None) -> bool:
        """Whether a group with this matcher applies; ``None`` subject = event without one."""
        if subject is None or (self.names is None and self.pattern is None):
            return True
        if self.names is not None:
            return subject in self.names
        assert self.pattern is not None
        return self.pattern.search(subject) is not None


MATCH_ALL = Matcher(source="*")


def compile_matcher(text: str | None) -> Matcher:
    """Compile a settings matcher; raises ``ValueError`` naming the text if the regex is bad."""
    if text is None:
        return MATCH_ALL
    stripped = text.strip()
    if stripped in ("", "*"):
        return Matcher(source=text)
    if _EXACT_LIST.fullmatch(stripped):
        names = frozenset(p.strip() for p in _SEPARATORS.split(stripped) if p.strip())
        return Matcher(source=text, names=names) if names else Matcher(source=text)
    try:
        pattern = re.compile(text)
    except (re.error, OverflowError, RecursionError) as exc:  # nesting, huge repeat counts too
        shown = text if len(text) <= 80 else f"{text[:80]}... ({len(text):,} chars)"
        raise ValueError(f"invalid regular expression {shown!r}: {exc}") from None
    return Matcher(source=text, pattern=pattern)


# -- the handler `if` condition -------------------------------------------------------------

TOOL_EVENTS: Final = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
"""The events on which a handler's ``if`` is evaluated; on any other event a handler with an
``if`` never runs (Claude Code: "Only evaluated on tool events")."""

_RULE_SHAPE: Final = re.compile(r"[^()\s]+(?:\(.*\))?", re.DOTALL)


class CallConditions(Protocol):
    """Decides whether a tool call matches a permission rule written as a handler's ``if``.

    Implemented by ``permissions.hook_conditions.PermissionRuleConditions`` (rule matching lives
    with the permission rules, a layer above hooks); the session hands it to the engine."""

    def holds(self, rule: str, call: ToolCall) -> bool:
        """Whether ``call`` matches ``rule``; True whenever that cannot be told (fail open)."""
        ...


@dataclass(frozen=True, slots=True)
class ToolCall:
    """What an ``if`` condition is tested against: one tool call and where it runs."""

    tool_name: str
    tool_input: Mapping[str, Any]
    cwd: Path
    project_root: Path
    home: Path
    conditions: CallConditions | None = None
    """How rules are matched; ``None`` (no matcher wired): every condition holds."""


@dataclass(kw_only=True, frozen=True, slots=True)
class IfCondition:
    """A handler's ``if``: one permission rule (``Bash(git push *)``, ``Edit(*.ts)``) the tool
    call must match for the hook to run. Best effort, as in Claude Code: when the call cannot be
    judged the hook runs; it is a filter, never a permission."""

    source: str
    valid: bool = True
    """False when the text is not a rule: then it always holds (fail open: the hook runs and
    decides), and a warning said so when the settings were read."""

    def holds(self, call: ToolCall | None) -> bool:
        if call is None:
            return False  # not a tool event: a hook with `if` never runs
        if not self.valid or call.conditions is None:
            return True
        return call.conditions.holds(self.source, call)


def compile_condition(text: str) -> tuple[IfCondition, str | None]:
    """The condition for an ``if`` text, and a warning when it is not a permission rule."""
    if _RULE_SHAPE.fullmatch(text.strip()):
        return IfCondition(source=text.strip()), None
    problem = f"{text!r} is not a permission rule ('Tool' or 'Tool(specifier)')"
    return IfCondition(source=text, valid=False), f"{problem}; the hook runs for every call"
