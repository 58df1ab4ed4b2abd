"""The sub-agent system of one session: the state every Agent tool call shares.

``AgentRuntime`` holds what is shared by all agents of a session — configuration, definitions,
the provider model, the project context, hooks and permissions, the record of every agent run,
the count of running children. Tools reach it through their context
(``agents.services.SessionServices.runtime``); what one running agent is, is
``agents.agent_run.AgentFrame`` (``ctx.owner``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagents.agents.agent_run import AgentRun
from subagents.agents.catalog import DefinitionWatch
from subagents.agents.definitions import DefinitionSet
from subagents.agents.memory import AgentMemory, MemoryFolderError, open_memory
from subagents.agents.project_context import ProjectContext
from subagents.agents.schema import AgentDefinition
from subagents.config import RuntimeConfig
from subagents.events import AgentRef, Event, EventSink, SystemEvent, discard
from subagents.hooks.engine import HookEngine
from subagents.loop.compaction import CompactionPolicy, policy_for
from subagents.loop.query import MAX_OUTPUT_TOKENS
from subagents.models.base import Model, ToolSchema
from subagents.models.pricing import SessionPrices
from subagents.models.resolve import resolve_alias
from subagents.models.retry import ModelCaller, ObservedModelCaller, RetryPolicy, new_caller
from subagents.observe import RunObserver
from subagents.permissions.checker import PermissionChecker
from subagents.permissions.context import PermissionContext
from subagents.state import ProjectState
from subagents.tools.base import Tool

if TYPE_CHECKING:
    from subagents.mcp.servers import McpServers

TOOLSETS_KEPT = 64
"""Distinct (definition, parent tools) pairs a session keeps tool lists for."""

CHILD_CONTEXTS_KEPT = 64
"""Distinct derived permission contexts a session keeps for sharing (``child_permissions``)."""


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
    definitions_watch: DefinitionWatch | None = None
    """Reloads ``definitions`` when a definition file changes (``agents.catalog``)."""
    transcripts: bool = True
    permissions: PermissionChecker | None = None
    """The session's permission checker, when configured."""
    hooks: HookEngine | None = None
    """The session's hook engine, when configured."""
    mcp: McpServers | None = None
    """The session's MCP servers, when any is configured (``agents.mcp_scope``)."""
    agents: list[AgentRun] = field(default_factory=list)
    running_children: int = 0
    sink: EventSink = discard
    on_child_done: list[Callable[[AgentRun], None]] = field(default_factory=list)
    observer: RunObserver | None = None
    """Told about every model call (telemetry; None: off, and callers are plain)."""
    prices: SessionPrices = field(default_factory=SessionPrices)
    """Each model name's price, once for the session (its callers' ``prices``)."""
    _agents_dir: tuple[ProjectState | None, str] = field(
        default=(None, ""), init=False, repr=False, compare=False
    )
    """The state ``transcript_file`` last joined against, and its agents folder as text."""
    _policies: dict[str, CompactionPolicy] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _prompts: dict[tuple[int, int, Path], _PromptEntry] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _toolsets: dict[tuple[int, int], _ToolsetEntry] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _child_contexts: dict[tuple[int, int, str | None, int], _ContextEntry] = field(
        default_factory=dict, init=False, repr=False, compare=False
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
        if self.observer is not None:
            return ObservedModelCaller(
                model=model,
                policy=self.retry,
                fallback=self.fallback,
                prices=self.prices,
                observer=self.observer,
            )
        return new_caller(
            model=model, policy=self.retry, fallback=self.fallback, prices=self.prices
        )

    def compaction_policy(self, model: Model) -> CompactionPolicy:
        """When an agent on ``model`` compacts (``RuntimeConfig`` knobs, the window table);
        one policy per model name for the session."""
        policy = self._policies.get(model.name)
        if policy is None:
            config = self.config
            policy = self._policies[model.name] = policy_for(
                model.name,
                max_output_tokens=MAX_OUTPUT_TOKENS,
                absolute_tokens=config.autocompact_tokens,
                auto=config.autocompact,
            )
        return policy

    def child_prompt(
        self, definition: AgentDefinition, cwd: Path, model: Model, build: Callable[[], str]
    ) -> str:
        """``build()``, once per definition, directory and model of the session: a fresh child's
        system prompt depends on nothing else while the project context is the same object
        (fixed for the session), and fifty children of one type would otherwise build and
        render the same text fifty times (protocol checks on the model, the environment block).
        Entries keep their keys' objects, so an id is never reused while its entry lives."""
        context = self.project_context
        key = (id(definition), id(model), cwd)
        hit = self._prompts.get(key)
        if hit is not None and hit.matches(definition, model, context):
            return hit.prompt
        prompt = build()
        if context is not None:  # without one, the environment's date is today's: not fixed
            self._prompts[key] = _PromptEntry(definition, model, context, prompt)
        return prompt

    def child_toolset(
        self,
        definition: AgentDefinition,
        parent_tools: list[Tool[Any]],
        build: Callable[[AgentDefinition, list[Tool[Any]]], list[Tool[Any]]],
    ) -> tuple[list[Tool[Any]], list[ToolSchema]]:
        """``build(definition, parent_tools)`` and the tools' schemas, once per definition and
        parent tool list of the session: fifty children of one type share one list of each
        (never changed in place: a spec that adds tools makes a new list and drops the
        schemas). Entries keep their keys' objects, so an id is never reused while they live."""
        key = (id(definition), id(parent_tools))
        hit = self._toolsets.get(key)
        if hit is not None and hit.definition is definition and hit.parent_tools is parent_tools:
            return hit.tools, hit.schemas
        tools = build(definition, parent_tools)
        schemas = [tool.schema() for tool in tools]
        if len(self._toolsets) < TOOLSETS_KEPT:
            self._toolsets[key] = _ToolsetEntry(definition, parent_tools, tools, schemas)
        return tools, schemas

    def child_permissions(
        self,
        parent: PermissionContext,
        definition: AgentDefinition | None,
        requested_mode: str | None,
        tools: list[Tool[Any]],
        derive: Callable[[], PermissionContext],
    ) -> PermissionContext:
        """``derive()``, once per parent context, definition, requested mode and tool list of
        the session: a child's permission context is a function of those four (all frozen or
        never changed in place), and a thousand children of one type would otherwise derive
        and hold a thousand equal contexts. A parent whose context changes (plan mode, an
        updated rule) has a new object, so a new entry. Entries keep their keys' objects."""
        key = (id(parent), id(definition), requested_mode, id(tools))
        hit = self._child_contexts.get(key)
        if hit is not None and hit.matches(parent, definition, tools):
            return hit.context
        context = derive()
        if len(self._child_contexts) < CHILD_CONTEXTS_KEPT:
            self._child_contexts[key] = _ContextEntry(parent, definition, tools, context)
        return context

    def transcript_for(self, agent_id: str) -> Path | None:
        """``state.agent_transcript(agent_id)``, or None when transcripts are off."""
        text = self.transcript_file(agent_id)
        return None if text is None else Path(text)

    def transcript_file(self, agent_id: str) -> str | None:
        """``transcript_for`` as text: what a child's job and run hold. The folder's text is
        kept per state and the name joined by an f-string — a ``pathlib`` join and the ``str``
        of its result parsed and formatted ~25 k instructions per child, this is ~0.5 k."""
        if not self.transcripts:
            return None
        state, folder = self._agents_dir
        if state is not self.state:
            state, folder = self._agents_dir = (self.state, str(self.state.agents_dir))
        return f"{folder}/{agent_id}.jsonl"  # (a Path's text has no trailing separator)

    def open_memory(
        self, definition: AgentDefinition, *, load_index: bool = True
    ) -> AgentMemory | None:
        """The memory folder of ``definition`` (its ``memory`` scope), or None — with a warning
        naming the folder — when it cannot be used."""
        scope = definition.memory
        if not scope:
            return None
        ref = AgentRef(agent_id=self.session_id, agent_type=definition.name)
        try:
            memory = open_memory(
                definition,
                scope,
                cwd=self.cwd,
                user_home=Path.home(),
                subagents_home=self.state.home,
                load_index=load_index,
            )
        except MemoryFolderError as exc:
            self.emit(SystemEvent(agent=ref, subtype="warning", data={"message": str(exc)}))
            return None
        return memory

    def context_block(self, *, read_only: bool) -> str:
        if self.project_context is None:
            return ""
        return self.project_context.render(read_only=read_only)


@dataclass(frozen=True, slots=True)
class _ToolsetEntry:
    """A definition's tools and schemas, derived from its parent's tools."""

    definition: AgentDefinition
    parent_tools: list[Tool[Any]]
    tools: list[Tool[Any]]
    schemas: list[ToolSchema]


@dataclass(frozen=True, slots=True)
class _ContextEntry:
    """A child's permission context, derived from its parent's."""

    parent: PermissionContext
    definition: AgentDefinition | None
    tools: list[Tool[Any]]
    context: PermissionContext

    def matches(
        self, parent: PermissionContext, definition: AgentDefinition | None, tools: list[Tool[Any]]
    ) -> bool:
        return self.parent is parent and self.definition is definition and self.tools is tools


@dataclass(slots=True, frozen=True)
class _PromptEntry:
    """A definition's system prompt for one model and project context."""

    definition: AgentDefinition
    model: Model
    context: ProjectContext
    prompt: str

    def matches(self, definition: AgentDefinition, model: Model, context: object) -> bool:
        return self.definition is definition and self.model is model and self.context is context
