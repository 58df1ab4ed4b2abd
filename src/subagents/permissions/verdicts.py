"""A permission verdict (``Decision``) and the words of its messages, shared by the general
decision (``decision.py``) and the Bash one (``bash_decision.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from subagents.permissions.context import agent_type_denied
from subagents.permissions.rules import AGENT_TOOL_NAMES, PermissionRule

Behavior = Literal["allow", "deny", "ask"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """The verdict and why: ``message`` is written for the model (deny) or the user (ask)."""

    behavior: Behavior
    message: str = ""
    rule: PermissionRule | None = None
    subject: str = ""
    """The call in words, e.g. "Bash with command `rm x`"; names the part that decided."""


def denied_by_rule(rule: PermissionRule, subject: str) -> Decision:
    if rule.tool in AGENT_TOOL_NAMES and rule.specifier is not None:
        message = agent_type_denied(rule)
    else:
        message = f"Permission to use {subject} has been denied by rule '{rule}'{rule.origin()}"
    return Decision(behavior="deny", message=message, rule=rule, subject=subject)


def ask_by_rule(rule: PermissionRule, subject: str, why: str = "") -> Decision:
    if why:
        message = f"{subject} needs approval: {why} rule '{rule}'{rule.origin()}."
    else:
        message = f"{subject} needs approval: rule '{rule}'{rule.origin()} asks for it."
    return Decision(behavior="ask", message=message, rule=rule, subject=subject)


def plan_denial(subject: str) -> Decision:
    return Decision(
        behavior="deny",
        message=f"Permission to use {subject} was denied: plan mode allows only read-only "
        "tools. Present the plan instead of making changes.",
        subject=subject,
    )


_SUBJECT_CHARS = 500


def bash_subject(command: str) -> str:
    """The call in words; a long command is cut, so a denial does not echo megabytes back."""
    text = command.strip()
    if len(text) > _SUBJECT_CHARS:
        text = f"{text[:_SUBJECT_CHARS]}… ({len(text):,} characters)"
    return f"Bash with command `{text}`"
