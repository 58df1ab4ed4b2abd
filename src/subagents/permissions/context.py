"""What one agent may do: its mode, the rules in force, its tools; and how a child inherits it.

A child's context is derived from its parent's and can only be narrower: its mode is capped by
the parent's (``modes.cap_mode``), the *asks are denied* bit of a ``dontAsk`` ancestor is kept,
every rule is inherited (deny rules above all: they are how a user keeps a child away from
``rm -rf``), and its tools are a subset of the parent's. Claude Code bug #52557 let a child
started from ``default`` escape to a more permissive mode; here the cap makes that impossible,
and a property test checks it over generated trees.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from subagents.permissions.modes import PermissionMode, cap_mode
from subagents.permissions.rules import AGENT_TOOL_NAMES, PermissionRule, RuleScope, parse_rules
from subagents.settings import RULE_BEHAVIORS, Settings


@dataclass(kw_only=True, frozen=True)
class PermissionContext:
    """The permission state of one agent."""

    mode: PermissionMode = "default"
    project_root: Path
    """Anchor of relative file-rule patterns (the directory the session started in)."""
    home: Path = field(default_factory=Path.home)
    allow: tuple[PermissionRule, ...] = ()
    deny: tuple[PermissionRule, ...] = ()
    ask: tuple[PermissionRule, ...] = ()
    additional_directories: tuple[Path, ...] = ()
    tools: frozenset[str] | None = None
    """Names of the tools this agent holds; None = not restricted here (the caller's set)."""
    asks_denied: bool = False
    """Set in ``dontAsk`` and in every descendant of a ``dontAsk`` agent."""

    @property
    def scope(self) -> RuleScope:
        return RuleScope(project_root=self.project_root, home=self.home)

    @property
    def denies_asks(self) -> bool:
        """Whether an ``ask`` decision must become a deny without prompting."""
        return self.asks_denied or self.mode == "dontAsk"

    def holds_tool(self, name: str) -> bool:
        return self.tools is None or name in self.tools

    def agent_type_denial(self, agent_type: str) -> str | None:
        """The refusal text when an ``Agent(X)``/``Task(X)`` deny rule names ``agent_type``."""
        for rule in self.deny:
            if rule.tool in AGENT_TOOL_NAMES and rule.specifier == agent_type:
                return agent_type_denied(rule)
        return None


def agent_type_denied(rule: PermissionRule) -> str:
    """The refusal text of an ``Agent(X)``/``Task(X)`` deny rule (at spawn and at a call)."""
    return (
        f"Agent type '{rule.specifier}' has been denied by permission rule '{rule}'{rule.origin()}"
    )


def derive_child(
    parent: PermissionContext,
    *,
    definition_mode: PermissionMode | None = None,
    requested_mode: PermissionMode | None = None,
    tools: Iterable[str] | None = None,
    disallowed_tools: Iterable[str] = (),
    extra_deny: Iterable[PermissionRule] = (),
) -> PermissionContext:
    """The child's context: never a mode, rule relaxation or tool the parent lacks.

    ``requested_mode`` (from the Agent call) wins over ``definition_mode`` (the definition's
    ``permissionMode``), which wins over inheriting the parent's mode; whichever it is, it is
    capped by the parent's. ``tools`` (the definition's list; None = all of the parent's) is
    intersected with the parent's, then ``disallowed_tools`` are removed. ``extra_deny`` adds
    rules; there is deliberately no way to add allow rules.
    """
    wanted = requested_mode or definition_mode or parent.mode
    child_tools = parent.tools if tools is None else frozenset(tools)
    if parent.tools is not None and child_tools is not None:
        child_tools = child_tools & parent.tools
    removed = frozenset(disallowed_tools)
    if child_tools is not None and removed:
        child_tools = child_tools - removed
    deny = parent.deny + tuple(extra_deny)
    if child_tools is None and removed:
        deny += tuple(PermissionRule(tool=name, source="disallowedTools") for name in removed)
    return replace(
        parent,
        mode=cap_mode(wanted, parent.mode),
        tools=child_tools,
        deny=deny,
        asks_denied=parent.denies_asks or wanted == "dontAsk",
    )


def context_from_settings(
    settings: Settings,
    *,
    cwd: Path,
    mode: PermissionMode | None = None,
    home: Path | None = None,
    tools: Iterable[str] | None = None,
    allowed_tools: Iterable[str] = (),
    disallowed_tools: Iterable[str] = (),
    on_warning: Callable[[str], None] | None = None,
) -> PermissionContext:
    """The main agent's context: settings rules, plus CLI ``--allowedTools``/``--disallowedTools``.

    ``mode`` (``--permission-mode``) overrides the settings' ``defaultMode``. A rule that is not
    valid is skipped and reported to ``on_warning`` as one plain string naming the rule and the
    file (or option) it came from, as Claude Code does: one bad rule never drops the others.
    """
    parsed: dict[str, list[PermissionRule]] = {behavior: [] for behavior in RULE_BEHAVIORS}
    warnings: list[str] = []
    for behavior in RULE_BEHAVIORS:
        for entry in settings.rules(behavior):
            rules, problems = parse_rules([entry.rule], str(entry.source), behavior=behavior)
            parsed[behavior] += rules
            warnings += problems
    for behavior, texts, source in (
        ("allow", allowed_tools, "--allowedTools"),
        ("deny", disallowed_tools, "--disallowedTools"),
    ):
        rules, problems = parse_rules(texts, source, behavior=behavior)
        parsed[behavior] += rules
        warnings += problems
    for warning in warnings:
        if on_warning is not None:
            on_warning(warning)
    return PermissionContext(
        mode=mode or settings.default_mode or "default",
        project_root=cwd.resolve(strict=False),
        home=(Path.home() if home is None else home).resolve(strict=False),
        allow=tuple(parsed["allow"]),
        deny=tuple(parsed["deny"]),
        ask=tuple(parsed["ask"]),
        additional_directories=tuple(settings.additional_directories),
        tools=None if tools is None else frozenset(tools),
    )
