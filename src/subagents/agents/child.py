"""Preparing a child agent: identity, model, tools, system prompt, context and budget.

``prepare_child`` turns a resolved definition plus the Agent call's arguments into an ``AgentJob``
that ``runner.run_agent`` can run, for the sync and the background path alike. The rules it
applies:

* model: tool input ``model`` > definition ``model`` > the parent's model;
* tools: definition tools ∩ the parent's tools, minus ``disallowedTools``, minus the always-blocked
  set; ``Agent`` only when the definition lists it (``definitions.resolve_tool_names``);
* permissions: the child is checked by everything that checks its parent (the parent's
  ``can_use_tool`` is chained in, never dropped), and a read-only definition (Explore, Plan) may
  only make read-only calls — so no state-changing Bash;
* context: the whitelist of ``context.create_subagent_context``; a sync child's abort is linked
  to its parent's, a background child's is its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from subagents.abort import AbortSignal
from subagents.agents.context import create_subagent_context
from subagents.agents.definitions import resolve_tool_names
from subagents.agents.prompts import child_system_prompt
from subagents.agents.runner import AgentJob, AgentRun
from subagents.agents.runtime import AgentFrame, AgentRuntime
from subagents.agents.schema import AgentDefinition
from subagents.events import AgentRef
from subagents.hooks.engine import HookEngine
from subagents.ids import new_id
from subagents.loop.query import Budget
from subagents.messages import Message, user_message
from subagents.permissions.checker import PermissionChecker
from subagents.permissions.context import derive_child
from subagents.permissions.modes import parse_mode
from subagents.tools.base import CanUseTool, PermissionResult, Tool, ToolContext
from subagents.worktrees.lifecycle import WorktreeInfo


@dataclass(kw_only=True)
class ChildRequest:
    """What the Agent call asked for, after validation and definition lookup."""

    definition: AgentDefinition
    prompt: str
    description: str
    model: str | None = None
    cwd: Path | None = None
    background: bool = False
    mode: str | None = None
    """The Agent call's ``mode``: capped by the parent's mode like the definition's."""
    tool_use_id: str | None = None
    agent_id: str | None = None
    """Drawn by the caller when something (a worktree) must be named after the child first."""
    roots: tuple[Path, ...] | None = None
    worktree: WorktreeInfo | None = None
    """The child's isolated worktree, when isolated."""


def prepare_child(
    runtime: AgentRuntime, parent_ctx: ToolContext, parent: AgentFrame, request: ChildRequest
) -> AgentJob:
    definition = request.definition
    agent_id = request.agent_id or new_id("local_agent")
    ref = AgentRef(
        agent_id=agent_id, agent_type=definition.name, parent_agent_id=parent_ctx.agent.agent_id
    )
    model = runtime.model_for(request.model, definition.model, parent.model)
    tools = child_tools(definition, parent.tools)
    names = [tool.name for tool in tools]
    cwd = request.cwd or parent_ctx.cwd
    system = build_system_prompt(runtime, definition, cwd, names)
    run = AgentRun(
        ref=ref,
        description=request.description,
        prompt=request.prompt,
        model=model.name,
        depth=parent.depth + 1,
        is_background=request.background,
        tool_use_id=request.tool_use_id,
    )
    messages: list[Message] = [user_message(request.prompt)]
    frame = AgentFrame(
        run=run,
        depth=parent.depth + 1,
        model=model,
        system=system,
        tools=tools,
        tool_schemas=[tool.schema() for tool in tools],
        messages=messages,
        permission_mode=definition.permission_mode or parent.permission_mode,
        definition=definition,
        is_background=request.background,
    )
    checker = derive_checker(parent, definition, names, request)
    if checker is not None:
        frame.permissions = checker
        frame.permission_mode = checker.context.mode
    abort = AbortSignal() if request.background else parent_ctx.abort.child()
    transcript = runtime.transcript_for(agent_id)
    ctx = create_subagent_context(
        parent_ctx,
        agent=ref,
        abort=abort,
        owner=frame,
        cwd=request.cwd,
        roots=request.roots,
        can_use_tool=child_permissions(checker or parent_ctx.can_use_tool, definition),
        hooks=child_hooks(runtime, definition, run, transcript),
        transcript=transcript,
    )
    return AgentJob(
        parent_tool_names=tuple(parent.tool_names()),
        run=run,
        caller=runtime.caller(model),
        system=system,
        tools=tools,
        ctx=ctx,
        messages=messages,
        budget=Budget(max_turns=definition.max_turns),
        transcript=transcript,
        tool_schemas=frame.tool_schemas,
        tool_concurrency=runtime.config.tool_concurrency,
        worktree=request.worktree,
    )


def derive_checker(
    parent: AgentFrame, definition: AgentDefinition, tool_names: list[str], request: ChildRequest
) -> PermissionChecker | None:
    """The child's permission checker: never a mode, rule or tool its parent lacks."""
    if parent.permissions is None:
        return None
    context = derive_child(
        parent.permissions.context,
        definition_mode=definition.permission_mode,
        requested_mode=parse_mode(request.mode) if request.mode else None,
        tools=tool_names,
        disallowed_tools=definition.disallowed_tools,
    )
    return parent.permissions.for_child(context, background=request.background)


def child_hooks(
    runtime: AgentRuntime, definition: AgentDefinition, run: AgentRun, transcript: Path | None
) -> HookEngine | None:
    """The session's hooks plus the definition's frontmatter hooks, scoped to this child."""
    if runtime.hooks is None:
        return None
    return runtime.hooks.for_agent(
        definition.hooks,
        run.agent_id,
        run.agent_type,
        transcript_path=transcript,
        source=definition.path,
    )


def child_tools(definition: AgentDefinition, parent_tools: list[Tool[Any]]) -> list[Tool[Any]]:
    by_name = {tool.name: tool for tool in parent_tools}
    names = resolve_tool_names(definition, list(by_name))
    return [by_name[name] for name in names if name in by_name]


def build_system_prompt(
    runtime: AgentRuntime, definition: AgentDefinition, cwd: Path, tool_names: list[str]
) -> str:
    prompt = child_system_prompt(definition.system_prompt, cwd, tool_names)
    context = runtime.context_block(read_only=definition.read_only)
    return f"{prompt}\n\n{context}" if context else prompt


def child_permissions(
    parent_check: CanUseTool | None, definition: AgentDefinition
) -> CanUseTool | None:
    """The parent's check, plus the read-only guard of read-only definitions."""
    if not definition.read_only:
        return parent_check

    async def check(tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> PermissionResult:
        if not tool.is_read_only(args):
            return PermissionResult(
                behavior="deny",
                message=(
                    f"{definition.name} is a read-only agent: {tool.name} with these arguments "
                    "would change state, so it is not allowed. Report what should be changed "
                    "instead."
                ),
            )
        if parent_check is not None:
            return await parent_check(tool, args, ctx)
        return PermissionResult(behavior="allow")

    return check
