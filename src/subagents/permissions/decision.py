"""The pure part of a permission check: rules and mode → allow, deny or ask.

Order (first that applies wins):

1. the agent does not hold the tool → deny;
2. a ``deny`` rule matches → deny (in every mode, ``bypassPermissions`` included);
3. ``plan`` mode and the call is not read-only → deny;
4. an ``ask`` rule matches → ask (even in ``bypassPermissions``: the user asked to be asked);
5. ``bypassPermissions`` → allow;
6. an ``allow`` rule matches → allow;
7. the call is read-only (and the tool's own claim: not an MCP server's hint) → allow;
8. ``acceptEdits`` and a file edit inside the working roots → allow;
9. otherwise → ask.

A Bash command is analysed (``tools.bash_commands.analyze``) into every program it runs,
nested ones included (``$(...)``, ``bash -c``, ``eval``, ``find -exec``, wrappers), each with the
spellings rules match (quotes removed, wrappers and paths stripped): a deny or ask rule on any
part decides for the whole; a command whose structure cannot be fully seen is asked whenever a
deny or ask rule could apply, and is never read-only; the command is allowed only if every part
is, by a rule or by being read-only. See ``docs/bash-permissions.md``.

Resolving ``ask`` (prompting, headless, background) is the checker's job, not this module's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from subagents.permissions.commands import (
    bash_rules,
    deny_or_ask_hit,
    invocation_allowed,
    unknown_runner,
)
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
from subagents.tools.bash_commands import Analysis, analyze
from subagents.tools.bash_readonly import READ_ONLY_MAX_CHARS, analysis_read_only
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


INLINE_BASH_CHARS = 16 * 1024
"""Bash commands longer than this are analysed in a worker thread, off the event loop."""


async def decide_off_loop(
    context: PermissionContext, tool: Tool[Any], args: BaseModel, ctx: ToolContext
) -> Decision:
    """``decide``, run in a worker thread for a long Bash command so the loop keeps running.

    The parser reads its input in chunks through a Python callback, so even the C parse gives
    the GIL back regularly; a 256 KiB command is checked while other agents carry on.
    """
    command = getattr(args, "command", None) if tool.name == "Bash" else None
    if isinstance(command, str) and len(command) > INLINE_BASH_CHARS:
        return await asyncio.to_thread(decide, context, tool, args, ctx)
    return decide(context, tool, args, ctx)


def _decide_tool(
    context: PermissionContext, tool: Tool[Any], args: BaseModel, ctx: ToolContext
) -> Decision:
    grants = tool.read_only_grants  # False: the read-only claim is a server's, not ours
    if grants and not context.deny and not context.ask and tool.is_read_only(args):
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
    if context.mode == "bypassPermissions":
        return Decision(behavior="allow", subject=subject)
    if rule := first(context.allow):  # named, so telemetry can say which rule allowed it
        return Decision(behavior="allow", subject=subject, rule=rule)
    if read_only and grants:
        return Decision(behavior="allow", subject=subject)
    if context.mode == "acceptEdits" and _edit_inside_roots(tool, args, ctx):
        return Decision(behavior="allow", subject=subject)
    return Decision(behavior="ask", message=f"{subject} needs approval.", subject=subject)


def _decide_bash(context: PermissionContext, command: str) -> Decision:
    analysis = analyze(command)
    subject = _bash_subject(command)
    hit = deny_or_ask_hit(context.deny, analysis)
    if hit is not None and hit.certain:
        return _denied_by_rule(hit.rule, _bash_subject(hit.part))
    if context.mode == "plan" and not _read_only(command, analysis):
        return _plan_denial(subject)
    if hit is not None:  # a deny rule may match once computed words are known
        return _ask_by_rule(hit.rule, _bash_subject(hit.part), _MAY_MATCH)
    if hit := deny_or_ask_hit(context.ask, analysis):
        return _ask_by_rule(hit.rule, _bash_subject(hit.part), "" if hit.certain else _MAY_MATCH)
    if unseen := _unseen(context, analysis):
        return unseen
    if context.mode == "bypassPermissions":
        return Decision(behavior="allow", subject=subject)
    if any(not is_prefix_rule(r) and bash_rule_matches(r, command) for r in context.allow):
        return Decision(behavior="allow", subject=subject)  # an exact rule for the whole line
    for invocation in analysis.invocations:
        if not invocation_allowed(invocation, context.allow):
            part = _bash_subject(invocation.command.source or invocation.forms[0].text)
            return Decision(behavior="ask", message=f"{part} needs approval.", subject=part)
    if analysis.opaque:
        reason = analysis.opaque[0]
        return Decision(
            behavior="ask", message=f"{subject} needs approval: {reason}.", subject=subject
        )
    return Decision(behavior="allow", subject=subject)


_MAY_MATCH = "part of it is computed when it runs and may turn out to match"


def _read_only(command: str, analysis: Analysis) -> bool:
    return len(command) <= READ_ONLY_MAX_CHARS and analysis_read_only(analysis)


def _unseen(context: PermissionContext, analysis: Analysis) -> Decision | None:
    """An ask when a deny/ask rule could apply to a part the checker cannot see."""
    rules = [r for r in bash_rules((*context.deny, *context.ask)) if r.specifier is not None]
    if not rules:
        return None
    subject = _bash_subject(analysis.command)
    if analysis.opaque:
        rule = rules[0]
        message = (
            f"{subject} needs approval: {analysis.opaque[0]}, so it cannot be checked against "
            f"rule '{rule}'{rule.origin()}."
        )
        return Decision(behavior="ask", message=message, rule=rule, subject=subject)
    runner = unknown_runner(rules, analysis)
    if runner is not None:
        part = _bash_subject(runner.part)
        message = (
            f"{part} needs approval: it is not a program this checker knows, and an argument "
            f"names what rule '{runner.rule}'{runner.rule.origin()} covers; it may run it."
        )
        return Decision(behavior="ask", message=message, rule=runner.rule, subject=part)
    return None


def _denied_by_rule(rule: PermissionRule, subject: str) -> Decision:
    if rule.tool in AGENT_TOOL_NAMES and rule.specifier is not None:
        message = agent_type_denied(rule)
    else:
        message = f"Permission to use {subject} has been denied by rule '{rule}'{rule.origin()}"
    return Decision(behavior="deny", message=message, rule=rule, subject=subject)


def _ask_by_rule(rule: PermissionRule, subject: str, why: str = "") -> Decision:
    if why:
        message = f"{subject} needs approval: {why} rule '{rule}'{rule.origin()}."
    else:
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


_SUBJECT_CHARS = 500


def _bash_subject(command: str) -> str:
    """The call in words; a long command is cut, so a denial does not echo megabytes back."""
    text = command.strip()
    if len(text) > _SUBJECT_CHARS:
        text = f"{text[:_SUBJECT_CHARS]}… ({len(text):,} characters)"
    return f"Bash with command `{text}`"
