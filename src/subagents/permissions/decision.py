"""The pure part of a permission check: rules and mode → allow, deny or ask.

Order (first that applies wins):

1. the agent does not hold the tool → deny;
2. a ``deny`` rule matches → deny (in every mode, ``bypassPermissions`` included);
3. ``plan`` mode and the call is not read-only → deny;
4. an ``ask`` rule matches → ask (even in ``bypassPermissions``: the user asked to be asked);
5. ``bypassPermissions`` → allow;
6. an ``allow`` rule matches → allow;
7. the call is read-only → allow;
8. ``acceptEdits`` and a file edit inside the working roots → allow;
9. otherwise → ask.

A Bash command is split into its simple commands (``bash_parse.split_commands``, which also
yields what runs inside ``$(…)``, backticks and subshells) and each is checked: a deny or ask
rule on any part decides for the whole; the command is allowed only if every part is, by a rule
or by being read-only. So ``Bash(git status:*)`` does not cover ``git status && rm -rf x``.
Deny and ask rules also see a part without its wrappers (``commands.command_forms``), so
``Bash(rm:*)`` stops ``sudo rm x`` and ``ls | xargs rm``. A
prefix rule does not cover a part that redirects output into a file (``echo x > f`` is a write,
not an ``echo``); only an exact rule or an explicit mode does.

Resolving ``ask`` (prompting, headless, background) is the checker's job, not this module's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from subagents.permissions.commands import command_forms
from subagents.permissions.context import PermissionContext, agent_type_denied
from subagents.permissions.rules import (
    AGENT_TOOL_NAMES,
    EDIT_TOOL_NAMES,
    PermissionRule,
    bash_rule_matches,
    is_prefix_rule,
    rule_matches,
    tool_path,
)
from subagents.tools.base import Tool, ToolContext
from subagents.tools.bash_parse import (
    has_output_redirection,
    is_read_only_command,
    split_commands,
)
from subagents.tools.paths import allowed_roots, is_inside

Behavior = Literal["allow", "deny", "ask"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """The verdict and why: ``message`` is written for the model (deny) or the user (ask)."""

    behavior: Behavior
    message: str = ""
    rule: PermissionRule | None = None
    subject: str = ""
    """The call in words, e.g. "Bash with command `rm x`"; names the part that decided."""


_ALLOW = Decision(behavior="allow")


def decide(
    context: PermissionContext, tool: Tool[Any], args: BaseModel, ctx: ToolContext
) -> Decision:
    """The verdict for one call, before any prompting."""
    if not context.holds_tool(tool.name):
        return Decision(
            behavior="deny",
            message=f"Permission to use {tool.name} was denied: "
            "the tool is not available to this agent.",
            subject=tool.name,
        )
    if tool.name == "Bash":
        # Only Bash input has ``command``; a missing attribute on a pydantic model raises (and
        # catches) AttributeError inside ``getattr``, too slow to pay on every other call.
        command = getattr(args, "command", None)
        if isinstance(command, str):
            return _decide_bash(context, command)
    return _decide_tool(context, tool, args, ctx)


def _decide_tool(
    context: PermissionContext, tool: Tool[Any], args: BaseModel, ctx: ToolContext
) -> Decision:
    if not context.deny and not context.ask and tool.is_read_only(args):
        return _ALLOW  # the common case, on every call: no rule can change the verdict
    names = (tool.name, *tool.aliases)
    subject = describe_call(tool.name, args, ctx)

    def first(rules: tuple[PermissionRule, ...]) -> PermissionRule | None:
        scope, cwd = context.scope, ctx.cwd
        return next((r for r in rules if rule_matches(r, names, args, scope, cwd)), None)

    if rule := first(context.deny):
        return _denied_by_rule(rule, subject)
    read_only = tool.is_read_only(args)
    if context.mode == "plan" and not read_only:
        return _plan_denial(subject)
    if rule := first(context.ask):
        return _ask_by_rule(rule, subject)
    if context.mode == "bypassPermissions" or first(context.allow) or read_only:
        return Decision(behavior="allow", subject=subject)
    if context.mode == "acceptEdits" and _edit_inside_roots(tool, args, ctx):
        return Decision(behavior="allow", subject=subject)
    return Decision(behavior="ask", message=f"{subject} needs approval.", subject=subject)


def _decide_bash(context: PermissionContext, command: str) -> Decision:
    parts = split_commands(command) or [command]
    for part in (*parts, command):
        if rule := _first_bash(context.deny, part):
            return _denied_by_rule(rule, _bash_subject(part))
    subject = _bash_subject(command)
    if context.mode == "plan" and not is_read_only_command(command):
        return _plan_denial(subject)
    for part in parts:
        if rule := _first_bash(context.ask, part):
            return _ask_by_rule(rule, _bash_subject(part))
    if context.mode == "bypassPermissions":
        return Decision(behavior="allow", subject=subject)
    if any(not is_prefix_rule(r) and bash_rule_matches(r, command) for r in context.allow):
        return Decision(behavior="allow", subject=subject)  # an exact rule for the whole line
    for part in parts:
        if not _bash_part_allowed(context, part):
            part_subject = _bash_subject(part)
            return Decision(
                behavior="ask", message=f"{part_subject} needs approval.", subject=part_subject
            )
    return Decision(behavior="allow", subject=subject)


def _bash_part_allowed(context: PermissionContext, part: str) -> bool:
    if is_read_only_command(part):
        return True
    writes = has_output_redirection(part)
    return any(
        bash_rule_matches(rule, part) and not (writes and is_prefix_rule(rule))
        for rule in context.allow
    )


def _first_bash(rules: tuple[PermissionRule, ...], part: str) -> PermissionRule | None:
    """The first deny/ask rule matching any spelling of ``part`` (``sudo rm`` is ``rm``)."""
    forms = command_forms(part)
    return next((r for r in rules if any(bash_rule_matches(r, f) for f in forms)), None)


def _denied_by_rule(rule: PermissionRule, subject: str) -> Decision:
    if rule.tool in AGENT_TOOL_NAMES and rule.specifier is not None:
        message = agent_type_denied(rule)
    else:
        message = f"Permission to use {subject} has been denied by rule '{rule}'{rule.origin()}"
    return Decision(behavior="deny", message=message, rule=rule, subject=subject)


def _ask_by_rule(rule: PermissionRule, subject: str) -> Decision:
    message = f"{subject} needs approval: rule '{rule}'{rule.origin()} asks for it."
    return Decision(behavior="ask", message=message, rule=rule, subject=subject)


def _plan_denial(subject: str) -> Decision:
    return Decision(
        behavior="deny",
        message=f"Permission to use {subject} was denied: plan mode allows only read-only "
        "tools. Present the plan instead of making changes.",
        subject=subject,
    )


def _edit_inside_roots(tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> bool:
    if tool.name not in EDIT_TOOL_NAMES:
        return False
    path = tool_path(args, ctx.cwd)
    return path is not None and any(is_inside(path, root) for root in allowed_roots(ctx))


def describe_call(tool_name: str, args: BaseModel, ctx: ToolContext) -> str:
    """A short description of the call for messages and prompts."""
    if tool_name in AGENT_TOOL_NAMES:
        agent_type = getattr(args, "subagent_type", None)
        return f"{tool_name} with subagent_type `{agent_type}`" if agent_type else tool_name
    path = tool_path(args, ctx.cwd)
    return f"{tool_name} on `{path}`" if path is not None else tool_name


def _bash_subject(command: str) -> str:
    return f"Bash with command `{command.strip()}`"
