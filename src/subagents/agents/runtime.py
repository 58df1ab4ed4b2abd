"""The sub-agent system of one session: the state every Agent tool call shares.

``AgentRuntime`` holds what is shared by all agents of a session — configuration, definitions,
the provider model, the project context, the record of every agent run, the count of running
children — and ``AgentFrame`` is what one *running* agent offers to the Agent tool it calls: its
depth in the tree, its model, and the exact bytes of its requests (system prompt, tool schemas,
thinking config, live history), which a fork copies to share the parent's prompt cache.
Tools reach both through their context (``agents.services.SessionServices`` and ``ctx.owner``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagents.agents.definitions import DefinitionSet
from subagents.agents.project_context import ProjectContext
from subagents.agents.runner import AgentRun
from subagents.agents.schema import AgentDefinition
from subagents.config import RuntimeConfig
from subagents.events import Event, EventSink, discard
from subagents.hooks.engine import HookEngine
from subagents.messages import Message
from subagents.models.base import Model, ToolSchema
from subagents.models.resolve import resolve_alias
from subagents.models.retry import ModelCaller, RetryPolicy
from subagents.permissions.checker import PermissionChecker
from subagents.state import ProjectState
from subagents.tools.base import Tool


@dataclass(kw_only=True)
class AgentFrame:
    """A running agent, as the Agent tool it calls sees it."""

    run: AgentRun
    depth: int
    model: Model
    system: str
    tools: list[Tool[Any]]
    tool_schemas: list[ToolSchema]
    messages: list[Message]
    thinking: dict[str, Any] | None = None
    permission_mode: str = "default"
    definition: AgentDefinition | None = None
    is_fork: bool = False
    is_teammate: bool = False
    is_background: bool = False
    permissions: PermissionChecker | None = None
    """This agent's permission checker, when rules are in force."""

    def tool_names(self) -> list[str]:
        return [tool.name for tool in self.tools]


@dataclass(kw_only=True)
class AgentRuntime:
    """Shared state of a session's agents."""

    session_id: str
    cwd: Path
    state: ProjectState
    config: RuntimeConfig
    definitions: DefinitionSet
    provider_model: Model
    retry: RetryPolicy
    fallback: Model | None = None
    project_context: ProjectContext | None = None
    transcripts: bool = True
    permissions: PermissionChecker | None = None
    """The session's permission checker, when configured."""
    hooks: HookEngine | None = None
    """The session's hook engine, when configured."""
    agents: list[AgentRun] = field(default_factory=list)
    running_children: int = 0
    sink: EventSink = discard
    on_child_done: list[Callable[[AgentRun], None]] = field(default_factory=list)
    _agents_dir: tuple[ProjectState | None, Path] = field(
        default=(None, Path()), init=False, repr=False, compare=False
    )

    def emit(self, event: Event) -> None:
        self.sink(event)

    def register(self, run: AgentRun) -> None:
        self.agents.append(run)

    def model_for(
        self, requested: str | None, definition_model: str | None, parent: Model
    ) -> Model:
        """Tool input ``model`` > definition ``model`` > the parent's model."""
        alias = requested or definition_model
        if alias is None or alias.strip().lower() == "inherit":
            return parent
        return resolve_alias(self.provider_model, alias)

    def caller(self, model: Model) -> ModelCaller:
        return ModelCaller(model=model, policy=self.retry, fallback=self.fallback)

    def transcript_for(self, agent_id: str) -> Path | None:
        if not self.transcripts:
            return None
        # ``state.agent_transcript`` with the folder joined once per state, not per child:
        # each pathlib join parses its parts again.
        state, folder = self._agents_dir
        if state is not self.state:
            state, folder = self._agents_dir = (self.state, self.state.agents_dir)
        return folder / f"{agent_id}.jsonl"

    def context_block(self, *, read_only: bool) -> str:
        if self.project_context is None:
            return ""
        return self.project_context.render(read_only=read_only)
