"""Running one agent — the main one or a child — from its prepared job to its final record.

Three objects describe a running agent, each once:

* ``AgentRun`` — its record: identity, task, placement (``is_background``), status and result;
  what the session's ``agents`` list reports;
* ``AgentFrame`` — what the agent's own tools see of it (``ctx.owner``): its run, model and the
  exact bytes of its requests (system prompt, tool schemas, thinking, live history), which a
  fork copies to share the parent's prompt cache, and its permissions;
* ``AgentJob`` — what running it takes: the frame, the model caller, the context, the budget,
  the inbox and the transcript.

``run_agent`` is the single path every agent takes: open its transcript, run the loop, and in a
``finally`` (success, error and abort alike) kill every process it left, close the transcript and
fill in its ``AgentRun`` record. Deciding *what* an agent gets (model, tools, prompt, context) is
the caller's business (``session.py`` for the main agent, ``agents/assembly.py`` for children).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from subagents.agents.schema import AgentDefinition
from subagents.events import AgentRef
from subagents.loop.compaction import CompactionPolicy
from subagents.loop.inbox import Inbox
from subagents.loop.query import (
    Budget,
    LoopOutcome,
    LoopStats,
    new_loop_spec,
    new_stats,
    run_loop,
)
from subagents.loop.scheduling import MAX_CONCURRENT_TOOLS
from subagents.messages import ContentBlock, Message, Usage
from subagents.models.base import Model, ToolSchema
from subagents.models.retry import ModelCaller
from subagents.observe import AgentEnd, AgentStart, provider_name
from subagents.permissions.checker import PermissionChecker
from subagents.store.transcript import TranscriptWriter
from subagents.tools.base import Tool, ToolContext

if TYPE_CHECKING:
    from subagents.agents.teams.membership import TeamMembership
    from subagents.mcp.servers import McpScope
    from subagents.worktrees.git import Worktree

AgentStatus = Literal["running", "completed", "failed", "killed"]


@dataclass(kw_only=True)
class AgentRun:
    """The runtime record of one agent run; what ``json`` output's ``agents`` list reports."""

    ref: AgentRef
    description: str = ""
    prompt: str = ""
    model: str = ""
    depth: int = 0
    is_background: bool = False
    status: AgentStatus = "running"
    reason: str = ""
    error: str | None = None
    result_text: str = ""
    started: float = field(default_factory=time.monotonic)
    duration_ms: int = 0
    stats: LoopStats = field(default_factory=LoopStats)
    transcript_file: str | None = None
    """The run's transcript, as text (``transcript_path`` reads it as a ``Path``): a child's
    path is made as text and handed on as text, no ``pathlib`` join and ``str`` per child."""
    messages: list[Message] = field(default_factory=list)
    tool_use_id: str | None = None
    """The parent's tool call that started this run (its durable identity)."""
    root_agent_id: str | None = None
    resumed_from: str | None = None
    resume_depth: int = 0
    worktree_fields: dict[str, str] = field(default_factory=dict)
    """``worktreePath``/``worktreeBranch`` when the child's worktree was kept."""
    worktree_outcome: dict[str, Any] | None = None
    agent_id: str = field(init=False, repr=False, compare=False)
    """``ref.agent_id`` as a plain attribute (the ref is never replaced): read ~10 times per
    child by its manager and records, and a property read is a Python call from C (~700
    instructions against ~80)."""
    agent_type: str = field(init=False, repr=False, compare=False)
    """``ref.agent_type``, the same way."""

    def __post_init__(self) -> None:
        self.agent_id, self.agent_type = self.ref.agent_id, self.ref.agent_type

    @property
    def usage(self) -> Usage:
        return self.stats.usage

    @property
    def transcript_path(self) -> Path | None:
        """The run's transcript (``transcript_file`` as a new ``Path``)."""
        return None if self.transcript_file is None else Path(self.transcript_file)

    @transcript_path.setter
    def transcript_path(self, path: Path | None) -> None:
        self.transcript_file = None if path is None else os.fspath(path)

    def summary(self) -> dict[str, Any]:
        ref, stats = self.ref, self.stats  # (each once: a property or look-up per read)
        usage = stats.usage
        return {
            "agentId": ref.agent_id,
            "agentType": ref.agent_type,
            "status": self.status,
            "totalToolUseCount": stats.tool_use_count,
            "totalTokens": usage.total,
            "totalDurationMs": self.duration_ms,
            "usage": usage.to_dict(),
            "costUsd": round(stats.cost_usd, 6),
            "reason": self.reason,
        }


def new_run(
    *,
    ref: AgentRef,
    description: str,
    prompt: str,
    model: str,
    depth: int,
    is_background: bool,
    tool_use_id: str | None,
    root_agent_id: str | None,
    resumed_from: str | None,
    resume_depth: int,
) -> AgentRun:
    """``AgentRun(ref=..., ...)`` of these fields, the others at their defaults, with every
    field set directly: each child builds one, and a class called with ten keywords packs them
    into a dict and unpacks it for ``__init__``, and calls four default factories (18.7 k
    instructions with its ``LoopStats`` against 9 k; docs/performance.md, session 15). The
    fields in the class's order, so both builds share one key table; a field added to the
    class fails ``tests/test_run_builders.py`` until it is set here too."""
    run: AgentRun = _new(AgentRun)
    run.ref = ref
    run.description = description
    run.prompt = prompt
    run.model = model
    run.depth = depth
    run.is_background = is_background
    run.status = "running"
    run.reason = ""
    run.error = None
    run.result_text = ""
    run.started = _monotonic()
    run.duration_ms = 0
    run.stats = new_stats()
    run.transcript_file = None
    run.messages = []
    run.tool_use_id = tool_use_id
    run.root_agent_id = root_agent_id
    run.resumed_from = resumed_from
    run.resume_depth = resume_depth
    run.worktree_fields = {}
    run.worktree_outcome = None
    run.agent_id = ref.agent_id
    run.agent_type = ref.agent_type
    return run


_new = object.__new__
_monotonic = time.monotonic


@dataclass(kw_only=True)
class AgentFrame:
    """A running agent, as its tools see it (``ToolContext.owner``; ``tools.base.RunningAgent``)."""

    run: AgentRun
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
    team: TeamMembership | None = None
    """The team this agent leads or belongs to (docs/teams.md), once it has one."""
    mode_ceiling: str | None = None
    """The most permissive mode this agent may take: its parent's at spawn (None: the main
    agent). ``ExitPlanMode`` returns a child to it."""
    permissions: PermissionChecker | None = None
    """This agent's permission checker, when rules are in force."""

    @property
    def depth(self) -> int:
        return self.run.depth

    @property
    def is_background(self) -> bool:
        """Read from the run: its placement has one home (``AgentRun.is_background``)."""
        return self.run.is_background

    def tool_names(self) -> list[str]:
        return [tool.name for tool in self.tools]


def new_frame(
    *,
    run: AgentRun,
    model: Model,
    system: str,
    tools: list[Tool[Any]],
    tool_schemas: list[ToolSchema],
    messages: list[Message],
    thinking: dict[str, Any] | None,
    permission_mode: str,
    definition: AgentDefinition | None,
    is_fork: bool,
    is_teammate: bool,
    team: TeamMembership | None,
    mode_ceiling: str | None,
    permissions: PermissionChecker | None,
) -> AgentFrame:
    """``AgentFrame(run=..., ...)`` with every field set directly: each child builds one, and a
    class called with fourteen keywords packs them into a dict and unpacks it for ``__init__``
    (docs/performance.md, session 15). The fields in the class's order; a field added to the
    class fails ``tests/test_run_builders.py`` until it is set here too."""
    frame: AgentFrame = _new(AgentFrame)
    frame.run = run
    frame.model = model
    frame.system = system
    frame.tools = tools
    frame.tool_schemas = tool_schemas
    frame.messages = messages
    frame.thinking = thinking
    frame.permission_mode = permission_mode
    frame.definition = definition
    frame.is_fork = is_fork
    frame.is_teammate = is_teammate
    frame.team = team
    frame.mode_ceiling = mode_ceiling
    frame.permissions = permissions
    return frame


@dataclass(kw_only=True)
class AgentJob:
    """A fully prepared agent: everything ``run_agent`` needs."""

    frame: AgentFrame
    caller: ModelCaller
    ctx: ToolContext
    budget: Budget = field(default_factory=Budget)
    inbox: Inbox | None = None
    transcript: str | None = None
    """Where the run's transcript goes (text: see ``AgentRun.transcript_file``), or None."""
    on_turn: Callable[[LoopStats], None] | None = None
    tool_concurrency: int = MAX_CONCURRENT_TOOLS
    parent_tool_names: tuple[str, ...] = ()
    """What the parent can use (does it have Read or Bash to look at an output file?)."""
    worktree: Worktree | None = None
    """The child's isolated worktree; settled at the end."""
    reminders: Callable[[], list[ContentBlock]] | None = None
    restate: Callable[[], list[ContentBlock]] | None = None
    """Standing context a compacted history starts with again (``TurnReminders``)."""
    """Blocks for each user message the loop builds: catalog changes, critical reminder."""
    mcp: McpScope | None = None
    """The child's own MCP servers; closed when it ends (``child_run.run_child``)."""
    logged_messages: int = 0
    """Leading ``messages`` already in the transcript (a resumed session's history), so they
    are not written twice."""
    compaction: CompactionPolicy | None = None
    """When the history is compacted (None: never automatically)."""
    task_text: str = ""
    """The task kept verbatim through compaction (default: the run's prompt)."""
    memory_only: frozenset[str] = frozenset()
    """Tools held only for the memory folder (frozen in the record for a resume)."""
    run: AgentRun = field(init=False, repr=False, compare=False)
    """``frame.run`` as a plain attribute (a frame's run is never replaced): read ~15 times per
    child by its manager, its turn watch and its records, and a property read is a Python call
    from C (~700 instructions against ~80)."""

    def __post_init__(self) -> None:
        self.run = self.frame.run

    @property
    def system(self) -> str:
        return self.frame.system

    @property
    def tools(self) -> list[Tool[Any]]:
        return self.frame.tools

    @property
    def tool_schemas(self) -> list[ToolSchema]:
        return self.frame.tool_schemas

    @property
    def messages(self) -> list[Message]:
        return self.frame.messages

    @property
    def thinking(self) -> dict[str, Any] | None:
        return self.frame.thinking


def new_job(
    *,
    frame: AgentFrame,
    caller: ModelCaller,
    ctx: ToolContext,
    budget: Budget,
    inbox: Inbox | None = None,
    transcript: str | None,
    on_turn: Callable[[LoopStats], None] | None = None,
    tool_concurrency: int,
    parent_tool_names: tuple[str, ...],
    worktree: Worktree | None,
    reminders: Callable[[], list[ContentBlock]] | None,
    restate: Callable[[], list[ContentBlock]] | None,
    mcp: McpScope | None,
    logged_messages: int = 0,
    compaction: CompactionPolicy | None,
    task_text: str,
    memory_only: frozenset[str],
) -> AgentJob:
    """``AgentJob(frame=..., ...)`` with every field set directly: each child's assembly builds
    one, and a class called with fourteen keywords packs them into a dict and unpacks it for
    ``__init__`` (docs/performance.md, session 15). The fields in the class's order; a field
    added to the class fails ``tests/test_run_builders.py`` until it is set here too."""
    job: AgentJob = _new(AgentJob)
    job.frame = frame
    job.caller = caller
    job.ctx = ctx
    job.budget = budget
    job.inbox = inbox
    job.transcript = transcript
    job.on_turn = on_turn
    job.tool_concurrency = tool_concurrency
    job.parent_tool_names = parent_tool_names
    job.worktree = worktree
    job.reminders = reminders
    job.restate = restate
    job.mcp = mcp
    job.logged_messages = logged_messages
    job.compaction = compaction
    job.task_text = task_text
    job.memory_only = memory_only
    job.run = frame.run
    return job


async def run_agent(job: AgentJob) -> LoopOutcome:
    """Run the job to its end; the run record ends terminal and no process is left behind."""
    # The frame's fields read from it once, not through the job's forwarding properties (a
    # Python call each: nine per agent).
    frame = job.frame
    run, messages, team = frame.run, frame.messages, frame.team
    log = TranscriptWriter(job.transcript) if job.transcript is not None else None
    run.transcript_file = job.transcript
    run.messages = messages
    if log is not None:
        for message in messages[job.logged_messages :]:
            log.append(message)
        log.flush()
    spec = new_loop_spec(
        caller=job.caller,
        system=frame.system,
        tools=frame.tools,
        ctx=job.ctx,
        messages=messages,
        prompt=run.prompt,
        budget=job.budget,
        thinking=frame.thinking,
        inbox=job.inbox,
        log=log,
        tool_schemas=frame.tool_schemas,
        stats=run.stats,
        tool_concurrency=job.tool_concurrency,
        compaction=job.compaction,
        task_text=job.task_text or run.prompt,
    )
    # The rest set here, not passed: a call of more than fifteen keywords is made through a
    # dict (``new_loop_spec``).
    spec.on_turn, spec.reminders, spec.restate = job.on_turn, job.reminders, job.restate
    if team is not None:
        spec.team_name, spec.member_name = team.team_name, team.name
    outcome: LoopOutcome | None = None
    observer = job.ctx.observer
    observation = observer.agent_started(agent_start(job)) if observer is not None else None
    try:
        outcome = await run_loop(spec)
        return outcome
    finally:
        job.ctx.processes.kill_all()
        if log is not None:
            log.close()
        _finish(run, outcome)
        if observation is not None:
            observation.end(agent_end(run))


def agent_start(job: AgentJob) -> AgentStart:
    """What an observer is told about an agent about to run (SPEC §15 "agent selected")."""
    frame, run = job.frame, job.run
    definition = frame.definition
    source = definition.source if definition is not None else "fork" if frame.is_fork else ""
    return AgentStart(
        agent=run.ref,
        model=frame.model.name,
        provider=provider_name(frame.model),
        source=source or ("session" if run.depth == 0 else "resume"),
        is_fork=frame.is_fork,
        is_background=run.is_background,
        depth=run.depth,
        description=run.description,
        prompt=run.prompt,
        tool_use_id=run.tool_use_id,
    )


def agent_end(run: AgentRun) -> AgentEnd:
    return AgentEnd(
        status=run.status,
        reason=run.reason,
        duration_ms=run.duration_ms,
        usage=run.stats.usage,
        num_turns=run.stats.num_turns,
        tool_use_count=run.stats.tool_use_count,
        is_background=run.is_background,
        error=run.error,
        final_text=run.result_text,
    )


def _finish(run: AgentRun, outcome: LoopOutcome | None) -> None:
    run.duration_ms = int((time.monotonic() - run.started) * 1000)
    run.model = run.model or ""
    if outcome is None:
        run.status, run.reason = "killed", "cancelled"
        return
    run.reason = outcome.reason
    run.error = outcome.error
    run.result_text = outcome.final_text
    if outcome.reason == "completed":
        run.status = "completed"
    elif outcome.reason == "aborted":
        run.status = "killed"
    else:
        run.status = "failed"
