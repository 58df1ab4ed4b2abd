"""What a background child is when it crosses the cluster, and what comes back, as plain data.

The driver (the session that launched the child) keeps the child's task, supervision, durable
record and notification; the node runs its loop. So the driver ships a ``RemoteChild`` — ids,
type, description, prompt, system prompt, tool names, messages, model spec, folder, transcript
path, turn budget, permission mode — and the node streams back ``Progress`` after each turn (the
counters the supervisor and the activity write read) and one ``Ended`` (the terminal fields
``Child.settle`` reads). Nothing here holds a live object: each value pickles as data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagents.agents.agent_run import AgentJob, AgentRun, AgentStatus
from subagents.loop.query import LoopStats, TerminalReason
from subagents.messages import Message, Usage


@dataclass(frozen=True, kw_only=True)
class RemoteChild:
    """One background child, as the node needs it to run the child's loop."""

    agent_id: str
    agent_type: str
    parent_agent_id: str | None
    session_id: str
    description: str
    prompt: str
    system: str
    tool_names: tuple[str, ...]
    messages: list[Message]
    model_spec: str
    cwd: str
    transcript: str | None
    max_turns: int | None
    permission_mode: str
    thinking: dict[str, Any] | None = None
    tool_use_id: str | None = None
    depth: int = 1


@dataclass(frozen=True, kw_only=True)
class Progress:
    """The child's counters after a turn (what ``Supervisor`` and ``records.activity`` read)."""

    num_turns: int
    tool_use_count: int
    usage: Usage
    activities: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Ended:
    """The child's end, as ``agent_run._finish`` left it on the node."""

    status: AgentStatus
    reason: TerminalReason
    error: str | None
    result_text: str
    duration_ms: int
    progress: Progress
    final_text: str = ""
    worktree_fields: dict[str, str] = field(default_factory=dict)


def remote_child(job: AgentJob, *, model_spec: str, cwd: Path, session_id: str) -> RemoteChild:
    """The ``RemoteChild`` of a registered background child's job."""
    run = job.run
    return RemoteChild(
        agent_id=run.agent_id,
        agent_type=run.agent_type,
        parent_agent_id=run.ref.parent_agent_id,
        session_id=session_id,
        description=run.description,
        prompt=run.prompt,
        system=job.system,
        tool_names=tuple(job.frame.tool_names()),
        messages=list(job.messages),
        model_spec=model_spec,
        cwd=str(job.ctx.cwd or cwd),
        transcript=job.transcript,
        max_turns=job.budget.max_turns,
        permission_mode=job.frame.permission_mode,
        thinking=job.thinking,
        tool_use_id=run.tool_use_id,
        depth=run.depth,
    )


def progress_of(stats: LoopStats) -> Progress:
    return Progress(
        num_turns=stats.num_turns,
        tool_use_count=stats.tool_use_count,
        usage=stats.usage,
        activities=tuple(stats.activities),
    )


def apply_progress(run: AgentRun, progress: Progress) -> None:
    """The driver's copy of the run takes the node's counters."""
    stats = run.stats
    stats.num_turns = progress.num_turns
    stats.tool_use_count = progress.tool_use_count
    stats.usage = progress.usage
    stats.activities = progress.activities


def apply_end(run: AgentRun, ended: Ended) -> None:
    """The driver's copy of the run takes the node's terminal fields."""
    apply_progress(run, ended.progress)
    run.status = ended.status
    run.reason = ended.reason
    run.error = ended.error
    run.result_text = ended.result_text
    run.duration_ms = ended.duration_ms
    run.worktree_fields = dict(ended.worktree_fields)
