"""A fresh child of a definition: the ``ChildSpec`` of an Agent call with a ``subagent_type``.

``definition_spec`` turns a resolved definition plus the Agent call's arguments into the spec
``assembly.assemble`` builds the child from, for the sync and the background path alike:

* model: tool input ``model`` > definition ``model`` > the parent's model;
* tools: definition tools ∩ the parent's tools, minus ``disallowedTools``, minus the always-blocked
  set; ``Agent`` only when the definition lists it (``definitions.resolve_tool_names``);
* system prompt: the definition's body rendered for the child, plus the project context
  (omitted for read-only definitions);
* permissions: derived from the parent's, capped by the definition's mode and the call's
  ``mode``; a read-only definition (Explore, Plan) may only make read-only calls;
* hooks: the definition's frontmatter hooks, scoped to the child;
* workspace: a given ``cwd``, or its own worktree (decided by the Agent tool, ``_place``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagents.agents.agent_run import AgentFrame
from subagents.agents.definitions import resolve_tool_names
from subagents.agents.memory import with_memory_tools
from subagents.agents.prompts import child_system_prompt, environment_for, profile_of
from subagents.agents.reminders import reminders_for
from subagents.agents.runtime import AgentRuntime
from subagents.agents.schema import AgentDefinition
from subagents.agents.spec import IN_PARENTS_FOLDER, ChildSpec, Workspace, new_spec
from subagents.loop.query import Budget, budget_of
from subagents.messages import user_message
from subagents.models.base import Model, ToolSchema
from subagents.permissions.modes import parse_mode
from subagents.tools import core_tools
from subagents.tools.base import Tool, ToolContext

if TYPE_CHECKING:
    from subagents.worktrees.git import Worktree


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
    worktree: Worktree | None = None
    """The child's isolated worktree, when isolated."""


_NO_TOOLS: frozenset[str] = frozenset()
"""One shared empty set (each ``frozenset()`` is a new object the collector tracks)."""

_UNLIMITED = Budget()
"""The budget of a definition without limits, shared (frozen; one object less per child)."""


def _budget(definition: AgentDefinition) -> Budget:
    limits = (definition.max_turns, definition.max_tokens, definition.max_wall_ms)
    if limits == (None, None, None) and definition.max_cost_usd is None:
        return _UNLIMITED
    return budget_of(definition)


def _workspace(request: ChildRequest) -> Workspace:
    cwd, roots, worktree = request.cwd, request.roots, request.worktree
    if cwd is None and roots is None and worktree is None:
        return IN_PARENTS_FOLDER
    return Workspace(cwd=cwd, roots=roots, worktree=worktree)


def definition_spec(
    runtime: AgentRuntime, parent_ctx: ToolContext, parent: AgentFrame, request: ChildRequest
) -> ChildSpec:
    definition = request.definition
    tools, schemas = runtime.child_toolset(definition, parent.tools, child_tools)
    cwd = request.cwd or parent_ctx.cwd
    memory = runtime.open_memory(definition) if definition.memory else None
    memory_only = _NO_TOOLS
    tool_schemas: list[ToolSchema] | None = schemas
    if memory is not None:
        tools, memory_only = with_memory_tools(tools, [*parent.tools, *core_tools()])
        tool_schemas = None  # other tools: assembly builds their schemas
    model = runtime.model_for(request.model, definition.model, parent.model)
    names = [tool.name for tool in tools]
    reminders = reminders_for(runtime, definition, names)
    first = reminders.first_message(request.prompt) if reminders else user_message(request.prompt)
    system = build_system_prompt(runtime, definition, cwd, model)
    if memory is not None:
        system = f"{system}\n\n{memory.prompt_block(definition.name)}"
    spec = new_spec(
        kind="fresh",
        agent_type=definition.name,
        description=request.description,
        prompt=request.prompt,
        model=model,
        system=system,
        tools=tools,
        tool_schemas=tool_schemas,
        messages=[first],
        budget=_budget(definition),
        definition=definition,
        permission_mode=definition.permission_mode or parent.permission_mode,
        background=request.background,
        tool_use_id=request.tool_use_id,
        workspace=_workspace(request),
    )
    # The rest set here, not passed: a call of more than fifteen keywords is made through a
    # dict (``new_spec``).
    if reminders:
        spec.reminders, spec.restate = reminders.next_blocks, reminders.restated_blocks
    if request.mode:
        spec.requested_mode = parse_mode(request.mode)
    spec.frontmatter_hooks, spec.agent_id = definition.hooks, request.agent_id
    spec.memory, spec.memory_only = memory, memory_only
    return spec


def child_tools(definition: AgentDefinition, parent_tools: list[Tool[Any]]) -> list[Tool[Any]]:
    by_name = {tool.name: tool for tool in parent_tools}
    names = resolve_tool_names(definition, list(by_name))
    return [by_name[name] for name in names if name in by_name]


def build_system_prompt(
    runtime: AgentRuntime, definition: AgentDefinition, cwd: Path, model: Model
) -> str:
    """The definition's body, the sub-agent notes, its environment and project context (built
    once per definition, directory and model of the session: ``AgentRuntime.child_prompt``)."""

    def build() -> str:
        return child_system_prompt(
            definition.system_prompt,
            environment_for(runtime.project_context, cwd, model),
            context=runtime.context_block(read_only=definition.read_only),
            profile=profile_of(model),
        )

    return runtime.child_prompt(definition, cwd, model, build)
