"""``assemble``: every child — fresh, fork, resume — built from its ``ChildSpec`` the same way.

From the spec and the parent (its context and frame) this draws the child's id, makes its run
record and frame, derives its permission checker (never a mode, rule or tool the parent lacks;
a fork keeps its parent's context), scopes the session's hooks to it (with the definition's
frontmatter hooks), derives its context (``context.create_subagent_context``: a sync child's
abort is linked to its parent's, a background child's is its own) and returns the ``AgentJob``
the children's manager runs. Whatever differs between kinds of child is in the spec; nothing
here asks which kind it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from subagents.abort import AbortSignal
from subagents.agents.agent_run import (
    AgentFrame,
    AgentJob,
    AgentRun,
    new_frame,
    new_job,
    new_run,
)
from subagents.agents.context import create_subagent_context
from subagents.agents.memory import AgentMemory, memory_guard
from subagents.agents.runtime import AgentRuntime
from subagents.agents.spec import ChildSpec, Workspace
from subagents.events import AgentRef, SystemEvent, new_ref
from subagents.hooks.engine import HookEngine
from subagents.ids import new_id
from subagents.permissions.checker import PermissionChecker
from subagents.permissions.context import PermissionContext, derive_child
from subagents.tools.base import CanUseTool, PermissionResult, Tool, ToolContext


def assemble(
    runtime: AgentRuntime, parent_ctx: ToolContext, parent: AgentFrame, spec: ChildSpec
) -> AgentJob:
    """The job of the child ``spec`` describes, as a child of ``parent``."""
    agent_id = spec.agent_id or new_id("local_agent")
    ref = new_ref(
        agent_id=agent_id, agent_type=spec.agent_type, parent_agent_id=parent_ctx.agent.agent_id
    )
    checker = _checker(runtime, parent, spec)
    frame = new_frame(
        run=_run(ref, spec, parent),
        model=spec.model,
        system=spec.system,
        tools=spec.tools,
        tool_schemas=spec.tool_schemas or [tool.schema() for tool in spec.tools],
        messages=spec.messages,
        thinking=spec.thinking,
        # The derived checker's mode when rules are in force, else the spec's.
        permission_mode=checker.context.mode if checker is not None else spec.permission_mode,
        definition=spec.definition,
        is_fork=spec.kind == "fork",
        is_teammate=spec.kind == "teammate",
        team=spec.team,
        mode_ceiling=parent.permission_mode,
        permissions=checker,
    )
    transcript = runtime.transcript_file(agent_id)  # (text: see ``AgentRun.transcript_file``)
    workspace = spec.workspace
    roots = workspace.roots
    can_use_tool = _can_use_tool(checker or parent_ctx.can_use_tool, spec)
    if spec.memory is not None:
        roots = _with_memory_root(workspace, parent_ctx, spec.memory)
        can_use_tool = memory_guard(
            can_use_tool, spec.memory, checker=checker, memory_only=spec.memory_only
        )
        _report_memory(runtime, ref, spec)
    ctx = create_subagent_context(
        parent_ctx,
        agent=ref,
        abort=AbortSignal() if spec.background else parent_ctx.abort.child(),
        owner=frame,
        cwd=workspace.cwd,
        roots=roots,
        can_use_tool=can_use_tool,
        hooks=_hooks(runtime, spec, ref, transcript),
        transcript=transcript,
    )
    return new_job(
        frame=frame,
        parent_tool_names=tuple(parent.tool_names()),
        caller=runtime.caller(spec.model),
        ctx=ctx,
        budget=spec.budget,
        transcript=transcript,
        tool_concurrency=runtime.config.tool_concurrency,
        worktree=workspace.worktree,
        reminders=spec.reminders,
        restate=spec.restate,
        compaction=runtime.compaction_policy(spec.model),
        task_text=spec.task_text,
        memory_only=spec.memory_only,
        mcp=spec.mcp,
    )


def _with_memory_root(
    workspace: Workspace, parent_ctx: ToolContext, memory: AgentMemory
) -> tuple[Path, ...]:
    """The child's roots (as ``create_subagent_context`` would choose them) plus its memory."""
    if workspace.roots is not None:
        roots = workspace.roots
    elif workspace.cwd is not None:
        roots = (workspace.cwd,)
    else:
        roots = parent_ctx.roots or (parent_ctx.cwd,)
    return (*roots, memory.folder)


def _report_memory(runtime: AgentRuntime, ref: AgentRef, spec: ChildSpec) -> None:
    """``memory_loaded``: which scope, from which definition source, which index file."""
    memory, definition = spec.memory, spec.definition
    if memory is None or spec.kind != "fresh":
        return
    data = {
        "scope": memory.scope,
        "source": definition.source if definition is not None else "runtime",
        "path": str(memory.index_path),
        "agent_type": spec.agent_type,
        "loaded": bool(memory.index),
    }
    runtime.emit(SystemEvent(agent=ref, subtype="memory_loaded", data=data))


def _run(ref: AgentRef, spec: ChildSpec, parent: AgentFrame) -> AgentRun:
    lineage = spec.lineage
    return new_run(
        ref=ref,
        description=spec.description,
        prompt=spec.prompt,
        model=spec.model.name,
        depth=parent.run.depth + 1,  # (the run's field: ``AgentFrame.depth`` is a property)
        is_background=spec.background,
        tool_use_id=spec.tool_use_id,
        root_agent_id=lineage.root_agent_id if lineage is not None else None,
        resumed_from=lineage.resumed_from if lineage is not None else None,
        resume_depth=lineage.resume_depth if lineage is not None else 0,
    )


def _checker(
    runtime: AgentRuntime, parent: AgentFrame, spec: ChildSpec
) -> PermissionChecker | None:
    """The child's checker: the parent's context capped by the definition and the call (the
    derived context shared by siblings of one type: ``AgentRuntime.child_permissions``)."""
    if parent.permissions is None:
        return None
    parent_context = parent.permissions.context
    if spec.inherit_permissions:
        return parent.permissions.for_child(parent_context)
    definition = spec.definition

    def derive() -> PermissionContext:
        return derive_child(
            parent_context,
            definition_mode=definition.permission_mode if definition is not None else None,
            requested_mode=spec.requested_mode,
            tools=spec.tool_names(),
            disallowed_tools=definition.disallowed_tools if definition is not None else (),
        )

    context = runtime.child_permissions(
        parent_context, definition, spec.requested_mode, spec.tools, derive
    )
    return parent.permissions.for_child(context)


def _can_use_tool(check: CanUseTool | None, spec: ChildSpec) -> CanUseTool | None:
    """The child's check, plus the read-only guard of a read-only definition (Explore, Plan:
    a call that would change state — a write, a state-changing Bash command — is denied)."""
    definition = spec.definition
    if definition is None or not definition.read_only:
        return check
    name = definition.name

    async def guarded(tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> PermissionResult:
        if not tool.is_read_only(args):
            return PermissionResult(
                behavior="deny",
                message=(
                    f"{name} is a read-only agent: {tool.name} with these arguments "
                    "would change state, so it is not allowed. Report what should be changed "
                    "instead."
                ),
            )
        if check is not None:
            return await check(tool, args, ctx)
        return PermissionResult(behavior="allow")

    return guarded


def _hooks(
    runtime: AgentRuntime, spec: ChildSpec, ref: AgentRef, transcript: str | None
) -> HookEngine | None:
    """The session's hooks plus the definition's frontmatter hooks, scoped to this child."""
    if runtime.hooks is None:
        return None
    definition = spec.definition
    return runtime.hooks.for_agent(
        spec.frontmatter_hooks,
        ref.agent_id,
        ref.agent_type,
        transcript_path=transcript,
        source=definition.path if definition is not None else None,
    )
