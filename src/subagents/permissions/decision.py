"""The pure part of a permission check: rules and mode → allow, deny or ask.

Order (first that applies wins):

1. the agent does not hold the tool → deny;
2. a ``deny`` rule matches → deny (in every mode, ``bypassPermissions`` included);
3. ``plan`` mode and the call is not read-only → deny;
4. an ``ask`` rule matches → ask (even in ``bypassPermissions``: the user asked to be asked);
5. ``bypassPermissions`` → allow;
6. an ``allow`` rule matches → allow;
7. the call is read-only (and the tool's own claim: not an MCP server's hint) → allow;
8. ``acceptEdits`` and a file edit inside the working roots, not in a ``.git`` → allow;
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
from typing import Any

from pydantic import BaseModel

from subagents.permissions.context import PermissionContext
from subagents.permissions.rules import (
    AGENT_TOOL_NAMES,
    EDIT_TOOL_NAMES,
    PermissionRule,
    rule_matches,
    tool_path,
)
from subagents.permissions.verdicts import (
    Decision,
    ask_by_rule,
    denied_by_rule,
    plan_denial,
)
from subagents.tools.base import Tool, ToolContext
from subagents.tools.paths import allowed_roots, is_inside

_ALLOW = Decision(behavior="allow")


def decide(
    context: PermissionContext, tool: Tool[Any], args: BaseModel, ctx: ToolContext
) -> Decision:
    """The verdict for one call, before any prompting."""
    held = context.tools  # ``holds_tool``, inlined: this runs for every call
    if held is not None and tool.name not in held:
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
            from subagents.permissions.bash_decision import decide_bash  # at the first Bash call

            return decide_bash(context, command)
    if allowed_without_rules(context, tool, args):
        return _ALLOW  # the common case, on every call: no rule can change the verdict
    return _decide_tool(context, tool, args, ctx)


def allowed_without_rules(context: PermissionContext, tool: Tool[Any], args: BaseModel) -> bool:
    """A read-only call of a tool whose read-only claim is ours, in a context without deny or
    ask rules: allowed in every mode (step 7), whatever else the context says. The caller has
    ruled out a tool the agent does not hold and a Bash command (analysed on its own)."""
    return (
        tool.read_only_grants and not context.deny and not context.ask and tool.is_read_only(args)
    )


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
    names = (tool.name, *tool.aliases)
    subject = describe_call(tool.name, args, ctx)

    def first(rules: tuple[PermissionRule, ...]) -> PermissionRule | None:
        scope, cwd = context.scope, ctx.cwd
        return next((r for r in rules if rule_matches(r, names, args, scope, cwd)), None)

    if rule := first(context.deny):
        return denied_by_rule(rule, subject)
    read_only = tool.is_read_only(args)
    if context.mode == "plan" and not read_only:
        return plan_denial(subject)
    if rule := first(context.ask):
        return ask_by_rule(rule, subject)
    if context.mode == "bypassPermissions":
        return Decision(behavior="allow", subject=subject)
    if rule := first(context.allow):  # named, so telemetry can say which rule allowed it
        return Decision(behavior="allow", subject=subject, rule=rule)
    if read_only and grants:
        return Decision(behavior="allow", subject=subject)
    if context.mode == "acceptEdits" and _edit_inside_roots(tool, args, ctx):
        return Decision(behavior="allow", subject=subject)
    return Decision(behavior="ask", message=f"{subject} needs approval.", subject=subject)


def _edit_inside_roots(tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> bool:
    """A file edit acceptEdits lets through: inside the working roots, and not of a git
    repository's own files (a ``.git`` anywhere in the path: the folder, or a ``.git`` file
    pointing git elsewhere). git runs what its config names — ``core.fsmonitor`` on ``git
    status``, ``diff.external`` on ``git diff``, read-only commands allowed without asking — so
    such an edit is a command, not an edit: it asks."""
    if tool.name not in EDIT_TOOL_NAMES:
        return False
    path = tool_path(args, ctx.cwd)
    if path is None or any(part.lower() == ".git" for part in path.parts):
        return False  # (any case: ``.GIT/config`` is ``.git/config`` on macOS and Windows)
    return any(is_inside(path, root) for root in allowed_roots(ctx))


def describe_call(tool_name: str, args: BaseModel, ctx: ToolContext) -> str:
    """A short description of the call for messages and prompts."""
    if tool_name in AGENT_TOOL_NAMES:
        agent_type = getattr(args, "subagent_type", None)
        return f"{tool_name} with subagent_type `{agent_type}`" if agent_type else tool_name
    path = tool_path(args, ctx.cwd)
    return f"{tool_name} on `{path}`" if path is not None else tool_name
