"""The Agent tool (alias ``Task``): the model's way to delegate to a child agent.

The tool itself is read-only and concurrency-safe — a child's own tools carry the real permissions
— so one model response can launch many children at once. ``call`` validates the input against the
rules of SPEC §3, resolves the definition, applies the limits (depth, concurrent children),
describes the child (``child.py``, ``fork.py`` or ``resume.py`` fill in a ``ChildSpec``,
``assembly.assemble`` builds it), places it (a given ``cwd`` or its own worktree) and hands it to
the session's children (``children.py``, ``foreground.py``): in the foreground — the parent
waits, with progress, and gets the ``completed`` result — or in the background, where the parent
gets ``async_launched`` at once and a notification later.
Whatever happens, the child's run record ends terminal and every process it started is dead.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from subagents.agents.agent_run import AgentFrame, AgentJob
from subagents.agents.assembly import assemble
from subagents.agents.catalog import spawn_refusal, spawnable
from subagents.agents.fork import FORK_AGENT_TYPE, FORK_IN_FORK_ERROR, fork_spec
from subagents.agents.fresh import ChildRequest, definition_spec
from subagents.agents.mcp_scope import attach_child_servers, brings_servers
from subagents.agents.resume import refuse_overrides, resume_spec, settle_writes
from subagents.agents.runtime import AgentRuntime
from subagents.agents.schema import AgentDefinition
from subagents.agents.services import SessionServices
from subagents.agents.spec import ChildSpec
from subagents.agents.synthesis import run_parallel_with_synthesis
from subagents.ids import new_id
from subagents.models.base import ToolSchema
from subagents.tools import descriptions
from subagents.tools.base import (
    CallInfo,
    LazyInput,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    tool_input_schema,
)

if TYPE_CHECKING:  # imported at the tool's first call (LazyInput)
    from subagents.tools.inputs.agent import AgentInput

DESCRIPTION = descriptions.AGENT


TEAMMATE_ONLY_FIELDS = ("name", "team_name", "mode")
_NO_SESSION = "The Agent tool needs a session runtime; run it inside a Session"


class AgentTool(Tool["AgentInput"]):
    name = "Agent"
    aliases = ("Task",)
    description = DESCRIPTION
    input_model = LazyInput["AgentInput"]("subagents.tools.inputs.agent", "AgentInput")
    max_result_chars = 100_000
    durable_call_identity = True

    _schemas: ClassVar[dict[tuple[type[AgentTool], bool, bool], ToolSchema]] = {}
    """Built schemas by (class, background_available, teammate): pydantic's schema generation
    costs more than a whole child run, and a session builds a new AgentTool."""

    def __init__(self, *, background_available: bool = True, teammate: bool = False) -> None:
        self.background_available = background_available
        self.teammate = teammate

    def is_read_only(self, args: AgentInput) -> bool:
        return True

    def is_concurrency_safe(self, args: AgentInput) -> bool:
        return True

    def schema(self) -> ToolSchema:
        """The input schema minus fields this environment does not offer (built once per
        class and flags: the same object each time, so the request bytes of a fork stay
        identical)."""
        key = (type(self), self.background_available, self.teammate)
        schema = AgentTool._schemas.get(key)
        if schema is None:
            schema = AgentTool._schemas[key] = self._build_schema()
        return schema

    def _build_schema(self) -> ToolSchema:
        schema = tool_input_schema(AgentTool)
        hidden = set()
        if not self.background_available:
            hidden.add("run_in_background")
        if self.teammate:
            hidden.update(TEAMMATE_ONLY_FIELDS)
        schema["properties"] = {k: v for k, v in schema["properties"].items() if k not in hidden}
        return ToolSchema(name=self.name, description=self.description, input_schema=schema)

    async def call(self, args: AgentInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        services, frame = _host(ctx)
        runtime = services.runtime
        self._check_environment(args, frame)
        if args.team_name or (args.name and frame.team is not None and frame.team.is_lead):
            return await self._teammate(args, services, ctx, frame)
        if frame.is_fork:
            raise ToolError(FORK_IN_FORK_ERROR)
        if args.resume_from:
            return await self._resume(args, args.resume_from, services, ctx, frame, info)
        if wants_fork(args.subagent_type, runtime):
            background = self._background(args, None, runtime)
            job = _fork_job(runtime, ctx, frame, args, info, background)
            return await _run(services, job, info, background, name=args.name)
        definition = resolve_definition(runtime, args.subagent_type, frame)
        _check_spawn(runtime, frame, definition.name)
        _check_limits(runtime, frame)
        background = self._background(args, definition, runtime)
        request = _request(args, definition, background, info)
        if runtime.config.parallel_tasks_count > 1 and not background:
            # Copies share the parent's working directory (no per-copy worktrees yet).
            return await run_parallel_with_synthesis(
                services, ctx, frame, request, runtime.config.parallel_tasks_count, info
            )
        await self._place(request, args, definition, runtime, ctx)
        spec = definition_spec(runtime, ctx, frame, request)
        return await _launch(services, ctx, frame, spec, info, name=args.name)

    def call_at_once(self, args: AgentInput, ctx: ToolContext, info: CallInfo) -> ToolOutput | None:
        """A background launch that awaits nothing — a fresh child with no worktree to create
        and no MCP servers of its own to start, or a fork — made here, as ``call`` makes it:
        the same checks in the same order, and ``async_launched``. None (before anything is
        done) for every other call: a teammate, a resume, a foreground child."""
        services, frame = _host(ctx)
        runtime = services.runtime
        self._check_environment(args, frame)
        if args.team_name or (args.name and frame.team is not None and frame.team.is_lead):
            return None
        if frame.is_fork:
            raise ToolError(FORK_IN_FORK_ERROR)
        if args.resume_from:
            return None
        if wants_fork(args.subagent_type, runtime):
            if not self._background(args, None, runtime):
                return None
            return services.launch(_fork_job(runtime, ctx, frame, args, info, True), name=args.name)
        definition = resolve_definition(runtime, args.subagent_type, frame)
        _check_spawn(runtime, frame, definition.name)
        _check_limits(runtime, frame)
        if not self._background(args, definition, runtime):
            return None
        if brings_servers(definition):
            return None
        if not args.cwd and (args.isolation or definition.isolation) == "worktree":
            return None
        request = _request(args, definition, True, info)
        if args.cwd:
            request.cwd = _checked_cwd(args.cwd, ctx)
        spec = definition_spec(runtime, ctx, frame, request)
        # ``_launch`` without its awaits: no servers to attach, none to close (``spec.mcp``).
        return services.launch(assemble(runtime, ctx, frame, spec), name=args.name)

    async def _teammate(
        self, args: AgentInput, services: SessionServices, ctx: ToolContext, frame: AgentFrame
    ) -> ToolOutput:
        if services.teams is None or not services.runtime.config.agent_teams:
            raise ToolError(
                "Teams are not available in this session (SUBAGENTS_AGENT_TEAMS=1 enables them): "
                "omit team_name"
            )
        if frame.is_fork or frame.depth > 0:
            raise ToolError("Only a team's lead can spawn teammates; teammates cannot nest")
        agent_type = args.subagent_type or "general-purpose"
        _check_spawn(services.runtime, frame, agent_type)
        from subagents.agents.teammates import spawn_teammate  # teams are opt-in

        return await spawn_teammate(
            services,
            ctx,
            frame,
            team_name=args.team_name,
            name=args.name,
            agent_type=agent_type,
            prompt=args.prompt,
            description=args.description,
            mode=args.mode,
            agent_tool=self.for_teammate(),
        )

    def for_teammate(self) -> AgentTool:
        """This tool as a teammate holds it: without name, team_name and mode."""
        return type(self)(background_available=self.background_available, teammate=True)

    async def _place(
        self,
        request: ChildRequest,
        args: AgentInput,
        definition: AgentDefinition,
        runtime: AgentRuntime,
        ctx: ToolContext,
    ) -> None:
        """Where the child works: its own worktree, a given ``cwd``, or the parent's."""
        if args.cwd:
            request.cwd = _checked_cwd(args.cwd, ctx)
            return
        if (args.isolation or definition.isolation) != "worktree":
            return
        from subagents.worktrees.commands import create_isolated  # isolation is rare: lazily
        from subagents.worktrees.git import WorktreeError, isolated_roots, working_dir_in

        agent_id = new_id("local_agent")
        hooks = runtime.hooks.config if runtime.hooks is not None else None
        try:
            worktree = await create_isolated(
                ctx.cwd,
                agent_id,
                hooks=hooks,
                session_id=runtime.session_id,
                processes=ctx.processes,
            )
        except WorktreeError as exc:
            raise ToolError(f"Could not create an isolated worktree: {exc}") from exc
        request.agent_id = agent_id
        request.worktree = worktree
        request.cwd = working_dir_in(worktree, ctx.cwd)
        request.roots = isolated_roots(ctx.roots, ctx.cwd, worktree.path)

    async def _resume(
        self,
        args: AgentInput,
        source_id: str,
        services: SessionServices,
        ctx: ToolContext,
        frame: AgentFrame,
        info: CallInfo,
    ) -> ToolOutput:
        """``resume_from``: a new run from the source's frozen snapshot (``agents.resume``);
        exempt from the concurrent-children limit (SPEC §15)."""
        refuse_overrides(model=args.model, mode=args.mode, isolation=args.isolation, cwd=args.cwd)
        await settle_writes(services.records)
        background = self._background(args, None, services.runtime)
        spec = resume_spec(
            services.runtime,
            services.records,
            ctx,
            frame,
            source_id=source_id,
            prompt=args.prompt,
            description=args.description,
            subagent_type=args.subagent_type,
            background=background,
            tool_use_id=info.tool_use_id,
        )
        return await _launch(services, ctx, frame, spec, info, name=args.name)

    def _background(
        self, args: AgentInput, definition: AgentDefinition | None, runtime: AgentRuntime
    ) -> bool:
        """``run_in_background``, a ``background: true`` definition, or force-async — unless
        background tasks are disabled (then everything runs in the foreground)."""
        if runtime.config.background_disabled or not self.background_available:
            return False
        wanted = bool(args.run_in_background) or runtime.config.force_async
        return wanted or bool(definition is not None and definition.background)

    def _check_environment(self, args: AgentInput, frame: AgentFrame) -> None:
        if args.cwd and args.isolation:
            raise ToolError("cwd and isolation are mutually exclusive: pass one or the other")
        if self.teammate or frame.is_teammate:
            used = [f for f in TEAMMATE_ONLY_FIELDS if getattr(args, f) is not None]
            if used:
                raise ToolError(
                    f"{', '.join(used)} cannot be used inside a teammate: teammates cannot "
                    "spawn teammates or change permission modes"
                )
        if args.run_in_background and not self.background_available:
            raise ToolError("run_in_background is not available: background tasks are disabled")


def _fork_job(
    runtime: AgentRuntime,
    ctx: ToolContext,
    frame: AgentFrame,
    args: AgentInput,
    info: CallInfo,
    background: bool,
) -> AgentJob:
    """A fork of ``frame``'s agent, checked and assembled."""
    if args.isolation or args.cwd:
        raise ToolError(
            "A fork shares its parent's working directory: isolation and cwd need a subagent_type"
        )
    _check_spawn(runtime, frame, FORK_AGENT_TYPE)
    _check_limits(runtime, frame)
    spec = fork_spec(frame, prompt=args.prompt, description=args.description, background=background)
    spec.tool_use_id = info.tool_use_id
    return assemble(runtime, ctx, frame, spec)


def _request(
    args: AgentInput, definition: AgentDefinition, background: bool, info: CallInfo
) -> ChildRequest:
    return ChildRequest(
        definition=definition,
        prompt=args.prompt,
        description=args.description,
        model=args.model,
        mode=args.mode,
        background=background,
        tool_use_id=info.tool_use_id,
    )


def _host(ctx: ToolContext) -> tuple[SessionServices, AgentFrame]:
    services, frame = ctx.services, ctx.owner
    if not isinstance(services, SessionServices) or not isinstance(frame, AgentFrame):
        raise ToolError(_NO_SESSION)
    return services, frame


async def _run(
    services: SessionServices,
    job: AgentJob,
    info: CallInfo,
    background: bool,
    *,
    name: str | None = None,
) -> ToolOutput:
    if background:
        return services.launch(job, name=name)
    return await services.run_foreground(job, info, name=name)


async def _launch(
    services: SessionServices,
    ctx: ToolContext,
    frame: AgentFrame,
    spec: ChildSpec,
    info: CallInfo,
    *,
    name: str | None,
) -> ToolOutput:
    """Start the child's own MCP servers (``requiredMcpServers`` may refuse the spawn), then
    assemble and run it. Until the child runs, its servers and worktree are ours to clean up."""
    runtime = services.runtime
    try:
        await attach_child_servers(runtime, spec)
    except ToolError:
        if spec.workspace.worktree is not None:
            from subagents.worktrees.git import finish_worktree

            await finish_worktree(spec.workspace.worktree, success=True)
        raise
    try:
        job = assemble(runtime, ctx, frame, spec)
        return await _run(services, job, info, spec.background, name=name)
    except BaseException:
        if spec.mcp is not None:
            await spec.mcp.close()  # idempotent: a child that ran has closed it already
        raise


def _checked_cwd(raw: str, ctx: ToolContext) -> Path:
    """``cwd`` must be an existing directory inside the parent's roots (no escape by cwd)."""
    path = Path(raw)
    if not path.is_absolute():
        raise ToolError(f"cwd must be an absolute path, got {raw!r}")
    resolved = path.resolve()
    if not resolved.is_dir():
        raise ToolError(f"cwd {raw!r} is not a directory")
    if not any(resolved.is_relative_to(root.resolve()) for root in ctx.roots):
        allowed = ", ".join(str(r) for r in ctx.roots)
        raise ToolError(f"cwd {raw!r} is outside the allowed directories ({allowed})")
    return resolved


def wants_fork(subagent_type: str | None, runtime: AgentRuntime) -> bool:
    """``fork`` always forks; an omitted type forks while fork mode is on."""
    if subagent_type is None:
        return runtime.config.fork_enabled
    return subagent_type.strip().lower() == FORK_AGENT_TYPE


def resolve_definition(
    runtime: AgentRuntime, subagent_type: str | None, frame: AgentFrame | None = None
) -> AgentDefinition:
    name = subagent_type or "general-purpose"
    definition = runtime.definitions.find(name)
    if definition is None:
        caller = frame.definition if frame is not None else None
        types = spawnable(runtime.definitions, caller, runtime.permissions)
        known = ", ".join(d.name for d in types) or "none"
        raise ToolError(f"Agent type '{name}' not found. Available agent types: {known}")
    return definition


def _check_spawn(runtime: AgentRuntime, frame: AgentFrame, agent_type: str) -> None:
    """``Agent(X)`` deny rules, then the caller's own ``Agent(a, b)`` allow-list."""
    refusal = spawn_refusal(frame.definition, agent_type, runtime.permissions)
    if refusal:
        raise ToolError(refusal)


def _check_limits(runtime: AgentRuntime, frame: AgentFrame) -> None:
    limit = runtime.config.max_spawn_depth
    if frame.run.depth + 1 > limit:  # (the run's field: ``AgentFrame.depth`` is a property)
        raise ToolError(
            f"Sub-agent nesting depth limit reached: agents may nest at most {limit} levels "
            "below the main agent (SUBAGENTS_MAX_SPAWN_DEPTH). Do the work directly instead."
        )
    cap = runtime.config.max_concurrent_subagents
    if runtime.running_children >= cap:
        raise ToolError(
            f"Sub-agent limit reached: {cap} agents are already running "
            "(SUBAGENTS_MAX_CONCURRENT_SUBAGENTS). Do not retry this call now; wait for running "
            "agents to finish or do the work directly."
        )
