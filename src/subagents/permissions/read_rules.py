"""Read rules for one file at a time: what ``ToolContext.read_guard`` answers.

The call-level check (``decision.decide``) sees the one path a call names. Grep and Glob then
read or list every file below it, so each file they touch is checked here against the ``deny``
rules (and, inside a search, the ``ask`` rules) of the Read family, the same rules with the same
anchoring as ``globs.path_matches``. A search visits thousands of files, so the rules are
compiled once per permission context (their anchors resolved once) and each file costs a few
regex matches on it and its parent folders.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from subagents.permissions.globs import anchored_pattern, glob_to_regex
from subagents.permissions.rules import PermissionRule, RuleScope, covers_tool

_READ_NAMES = ("Read",)


@dataclass(frozen=True, slots=True)
class _CompiledRule:
    """A read rule with its path pattern compiled."""

    rule: PermissionRule
    regex: re.Pattern[str] | None
    """None: the rule has no specifier and covers every file."""

    def matches(self, path: Path) -> bool:
        if self.regex is None:
            return True
        candidate = path
        while True:  # a pattern naming a folder covers everything below it
            if self.regex.fullmatch(candidate.as_posix()):
                return True
            if candidate.parent == candidate:
                return False
            candidate = candidate.parent


@functools.lru_cache(maxsize=128)
def _compiled(rules: tuple[PermissionRule, ...], scope: RuleScope) -> tuple[_CompiledRule, ...]:
    compiled = []
    for rule in rules:
        if not covers_tool(rule, _READ_NAMES):
            continue
        if rule.specifier is None:
            compiled.append(_CompiledRule(rule=rule, regex=None))
            continue
        pattern = glob_to_regex(anchored_pattern(rule.specifier, scope))
        compiled.append(_CompiledRule(rule=rule, regex=re.compile(pattern, re.DOTALL)))
    return tuple(compiled)


def read_denial(
    deny: tuple[PermissionRule, ...],
    ask: tuple[PermissionRule, ...],
    scope: RuleScope,
    path: Path,
    *,
    asks: bool,
) -> str | None:
    """Why reading the resolved ``path`` is refused, or None (see ``tools.base.ReadGuard``)."""
    for compiled in _compiled(deny, scope):
        if compiled.matches(path):
            rule = compiled.rule
            return f"Permission to read {path} has been denied by rule '{rule}'{rule.origin()}."
    if asks:
        for compiled in _compiled(ask, scope):
            if compiled.matches(path):
                rule = compiled.rule
                return (
                    f"Reading {path} needs approval by rule '{rule}'{rule.origin()}; a search "
                    "cannot ask for each file, so it was skipped."
                )
    return None
