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
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pydantic import BaseModel, create_model

if TYPE_CHECKING:
    from subagents.permissions.rules import PermissionRule

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
    except re.error as exc:
        raise ValueError(f"invalid regular expression {text!r}: {exc}") from None
    return Matcher(source=text, pattern=pattern)


# -- the handler `if` condition -------------------------------------------------------------

TOOL_EVENTS: Final = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
"""The events on which a handler's ``if`` is evaluated; on any other event a handler with an
``if`` never runs (Claude Code: "Only evaluated on tool events")."""

_ASSIGNMENT = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=(?:'[^']*'|\"[^\"]*\"|\S)*\s+)+")
_EXPANSION = re.compile(r"\$[({A-Za-z_]|`")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """What an ``if`` condition is tested against: one tool call and where it runs."""

    tool_name: str
    tool_input: Mapping[str, Any]
    cwd: Path
    project_root: Path
    home: Path


@dataclass(kw_only=True, frozen=True, slots=True)
class IfCondition:
    """A handler's ``if``: one permission rule (``Bash(git push *)``, ``Edit(*.ts)``) the tool
    call must match for the hook to run. Best effort, as in Claude Code: when the command's
    structure cannot be seen (unparsable, a dynamic command name, or a substitution while the
    pattern names more than the command) the hook runs; it is a filter, never a permission."""

    source: str
    rule: PermissionRule | None
    """``None`` when the text is not a rule: then the condition always holds (fail open: the
    hook runs and decides), and a warning said so when the settings were read."""

    def holds(self, call: ToolCall | None) -> bool:
        if call is None:
            return False  # not a tool event: a hook with `if` never runs
        rule = self.rule
        if rule is None:
            return True
        names = [call.tool_name, *(AGENT_ALIASES if call.tool_name in AGENT_ALIASES else ())]
        if rule.tool not in names and not _mcp_covers(rule, call.tool_name):
            return False  # one `if` rule matches one tool's calls (no Edit → Write family)
        if rule.specifier is None:
            return True
        if rule.tool == "Bash":
            command = call.tool_input.get("command")
            return isinstance(command, str) and _bash_condition(rule.specifier, command)
        return _other_condition(rule, call)


AGENT_ALIASES: Final = ("Agent", "Task")


def compile_condition(text: str) -> tuple[IfCondition, str | None]:
    """The condition for an ``if`` text, and a warning when it is not a permission rule."""
    from subagents.permissions.rules import parse_rule

    try:
        return IfCondition(source=text, rule=parse_rule(text)), None
    except ValueError as exc:
        return IfCondition(source=text, rule=None), f"{exc}; the hook runs for every call"


def _mcp_covers(rule: PermissionRule, tool_name: str) -> bool:
    from subagents.permissions.rules import covers_tool

    return rule.tool.startswith("mcp__") and covers_tool(rule, [tool_name])


def _bash_condition(spec: str, command: str) -> bool:
    from subagents.permissions.rules import bash_specifier_matches
    from subagents.tools.bash_parse import split_commands

    names_more_than_command = len(spec.removesuffix(":*").removesuffix(" *").split()) > 1
    if names_more_than_command and _EXPANSION.search(command):
        return True  # what `$(...)` or `$VAR` expands to cannot be seen
    try:
        shlex.split(command)
        parts = split_commands(command) or [command]
    except ValueError:
        return True  # unparsable: run the hook, let it decide
    for part in (*parts, command):
        simple = _ASSIGNMENT.sub("", part.strip())
        if simple.startswith(("$", "`")):
            return True  # a dynamic command name
        if bash_specifier_matches(spec, simple):
            return True
    return False


def _other_condition(rule: PermissionRule, call: ToolCall) -> bool:
    from subagents.permissions.rules import RuleScope, rule_matches

    args = _input_view(call.tool_input)
    scope = RuleScope(project_root=call.project_root, home=call.home)
    try:
        return rule_matches(rule, [rule.tool], args, scope, call.cwd)
    except (OSError, ValueError, RuntimeError):
        return True  # a path that cannot be resolved: run the hook, let it decide


def _input_view(tool_input: Mapping[str, Any]) -> BaseModel:
    """The raw input as a model whose fields are its keys (what rule matching reads)."""
    keys = tuple(sorted(key for key in tool_input if key.isidentifier()))
    model = _input_model(keys)
    return model.model_validate({key: tool_input[key] for key in keys})


@lru_cache(maxsize=64)
def _input_model(keys: tuple[str, ...]) -> type[BaseModel]:
    fields: dict[str, Any] = {key: (Any, None) for key in keys}
    return create_model("HookToolInput", **fields)
