"""Bash rules against an analysed command (``tools.bash_commands.analyze``).

- ``deny_or_ask_hit``: the first deny/ask rule that matches any form of any invocation (the
  command as written, each wrapper removed, nested commands), the source text of a simple
  command, or the whole line; a form with computed words gives a *possible* hit.
- ``unknown_runner``: an unknown program whose literal arguments name the program of a deny/ask
  rule (``foo rm f`` with ``Bash(rm:*)``): it may be a wrapper this checker does not know.
- ``invocation_allowed``: an allow rule (or being read-only) covers the invocation, looking
  through transparent wrappers only (``timeout 9 npm test`` is ``npm test``; ``sudo rm`` is not
  ``rm``).

See ``docs/bash-permissions.md`` for the whole order of the decision.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from subagents.permissions.rules import (
    PermissionRule,
    bash_rule_matches,
    bash_rule_may_match,
    covers_tool,
    is_prefix_rule,
    rule_program,
)
from subagents.tools.bash_commands import Analysis, Form, Invocation, harmless_assignment
from subagents.tools.bash_readonly import invocation_read_only, known_program
from subagents.tools.bash_wrappers import ESCALATING, SHELLS, TRANSPARENT, is_wrapper

__all__ = [
    "RuleHit",
    "bash_rules",
    "deny_or_ask_hit",
    "invocation_allowed",
    "unknown_runner",
]


@dataclass(frozen=True, slots=True)
class RuleHit:
    """A rule that applies to part of a command; ``certain`` is False for a possible match."""

    rule: PermissionRule
    part: str
    certain: bool = True
    stored: str | None = None
    """For ``unknown_runner``: the variable or setting that holds the rule's program as text,
    or None when an unknown program was given it as an argument."""


def bash_rules(rules: Sequence[PermissionRule]) -> list[PermissionRule]:
    """The rules that govern Bash."""
    return [rule for rule in rules if covers_tool(rule, ("Bash",))]


def deny_or_ask_hit(rules: Sequence[PermissionRule], analysis: Analysis) -> RuleHit | None:
    """The first rule matching any spelling of any part; a certain match beats a possible one."""
    rules = bash_rules(rules)
    if not rules:
        return None
    possible: RuleHit | None = None
    for invocation in analysis.invocations:
        part = invocation.command.source or invocation.forms[0].text
        texts = (invocation.command.source, *(form.text for form in invocation.forms))
        for rule in rules:
            if any(bash_rule_matches(rule, text) for text in texts):
                return RuleHit(rule, part)
            if possible is None and _may_match(rule, invocation.forms):
                possible = RuleHit(rule, part, certain=False)
    for rule in rules:
        if bash_rule_matches(rule, analysis.command):
            return RuleHit(rule, analysis.command)
    return possible


def _may_match(rule: PermissionRule, forms: Sequence[Form]) -> bool:
    for form in forms:
        prefix = form.literal_prefix  # "" = a computed program name: reported as unseen instead
        if prefix and bash_rule_may_match(rule, prefix):
            return True
    return False


def unknown_runner(rules: Sequence[PermissionRule], analysis: Analysis) -> RuleHit | None:
    """An unknown program given the name of a denied/asked program in an argument.

    ``mywrap rm f``, ``awk 'BEGIN{system("rm f")}'``, ``ln -s /bin/rm x``: a program this
    checker does not know may run (or set up) what the rule names.
    """
    names: dict[str, PermissionRule] = {}
    for rule in bash_rules(rules):
        program = rule_program(rule)
        if program is not None:
            names.setdefault(program, rule)
    if not names:
        return None
    pattern = re.compile(
        r"(?<![\w.-])(?:[\w./-]*/)?(" + "|".join(map(re.escape, names)) + r")(?![\w.-])"
    )
    for invocation in analysis.invocations:
        form = invocation.last
        part = invocation.command.source or form.text
        for name, value in _stored_values(invocation):
            match = pattern.search(value)
            if (
                match is not None
            ):  # `GIT_SSH_COMMAND='rm f' git fetch`, `git config alias.x '!rm f'`
                return RuleHit(names[match.group(1)], part, certain=False, stored=name)
        program = form.program
        if program is None or program in names or _known(program):
            continue
        for word in form.words[1:]:
            match = pattern.search(word.text) if word.literal else None
            if match is not None:
                rule = names[match.group(1)]
                return RuleHit(rule, part, certain=False)
    return None


_DECLARING = frozenset({"export", "declare", "typeset", "local", "readonly"})


def _stored_values(invocation: Invocation) -> Iterator[tuple[str, str]]:
    """Text a program may later run as a command: the values of the variables the invocation
    sets (``PAGER=``, ``GIT_SSH_COMMAND=``, ``GIT_CONFIG_VALUE_0=``, ``EDITOR=``, through
    ``env`` or ``export`` too) and what ``git config`` stores (``alias.x '!cmd'``,
    ``core.pager``). Which variables and settings run code is open-ended; any of them that
    names a denied program is asked."""
    for assignment in (*invocation.command.assignments, *invocation.assignments):
        value = assignment.value
        if value is not None and value.literal:
            yield assignment.name, value.text
    words = invocation.last.words
    program = invocation.last.program
    if program in _DECLARING:
        for word in words[1:]:
            variable, eq, text = word.text.partition("=")
            if eq and word.literal:
                yield variable, text
    elif program == "git" and len(words) > 1 and words[1].text == "config":
        setting = next((w.text for w in words[2:] if not w.text.startswith("-")), "config")
        for word in words[2:]:
            if word.literal:
                yield f"git config {setting}", word.text


def _known(program: str) -> bool:
    return known_program(program) or is_wrapper(program) or program in SHELLS


def invocation_allowed(invocation: Invocation, allow: Sequence[PermissionRule]) -> bool:
    """Whether the invocation is read-only or an allow rule covers what it runs."""
    if invocation_read_only(invocation):
        return True
    writes = invocation.command.writes
    rules = [r for r in bash_rules(allow) if not (writes and is_prefix_rule(r))]
    exact = [r for r in rules if not is_prefix_rule(r)]
    command = invocation.command
    if command.source_complete and any(bash_rule_matches(r, command.source) for r in exact):
        return True  # an exact rule for this simple command as written
    if not rules:
        return False
    if invocation.opaque is not None or invocation.end == "opaque":
        first = invocation.forms[0]
        return first.program is not None and any(bash_rule_matches(r, first.text) for r in rules)
    if invocation.end in ("none", "container") and not _escalates(invocation):
        return not writes  # runs nothing itself (its nested commands are checked on their own)
    return any(
        bash_rule_matches(rule, text) for text in _eligible_texts(invocation) for rule in rules
    )


def _escalates(invocation: Invocation) -> bool:
    return any(form.program in ESCALATING for form in invocation.forms)


def _eligible_texts(invocation: Invocation) -> Iterator[str]:
    """The forms an allow rule may match: through transparent wrappers to the program, and any
    form that starts with a privilege wrapper (a rule must name ``sudo`` to cover ``sudo x``).

    Assignments that could change what the program does stay in front of the text, so
    ``PAGER=x git log`` is not covered by ``Bash(git log:*)``.
    """
    unsafe = [a.source for a in invocation.assignments if not harmless_assignment(a, bare=False)]
    prefix = " ".join(unsafe)
    forms = invocation.forms
    if prefix:
        yield f"{prefix} {forms[0].text}"
        return
    for index, form in enumerate(forms):
        if form.program in ESCALATING or index == len(forms) - 1:
            yield form.text
        if form.via is not None and form.via not in TRANSPARENT:
            return
