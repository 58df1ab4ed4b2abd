"""``Child``: one running child's state in its session — the one object that owns it.

A child is described once by each of: its ``AgentJob`` (what running it takes; through it its
frame and its ``AgentRun`` record), its asyncio task, its ``TaskState`` in the session's task
registry, and what the session learned while it ran (progress seen, a stall, a stop). Two
decisions about a child are made here and nowhere else:

* its **placement** — ``move_to_background`` is the only change of ``AgentRun.is_background``
  after the child started; the frame, the permission checker and the shell manager read it;
* its **terminal status** — ``settle`` decides it from what happened: its loop's own end
  (``agent_run.run_agent`` records it), then a stall (failed, with the stall as its error), a stop
  (TaskStop, shutdown: killed), a cancellation before its loop ended (killed), and a child that
  never reached an end of its loop (failed).

Teammates (issue 22) are children too: their placement is "background" from the start, their
end is settled here the same way.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from subagents.abort import LinkedAbortSignal
from subagents.agents.agent_run import AgentJob, AgentRun, AgentStatus
from subagents.agents.tasks import TaskState
from subagents.loop.query import LoopOutcome


@dataclass(kw_only=True, eq=False)
class Child:
    """A running child: its job, task and task state, and its last progress."""

    job: AgentJob
    task: asyncio.Task[LoopOutcome]
    state: TaskState
    activity: tuple[int, int, int] = (0, 0, 0)
    """(turns, tool uses, tokens) at the last check: a change is progress."""
    last_progress: float = field(default_factory=time.monotonic)
    stalled_ms: int | None = None
    """Set when the supervisor aborted it for making no progress."""
    stopped: bool = False
    """Set when it was stopped (TaskStop, ``tasks stop``, shutdown)."""
    finalized: bool = False
    run: AgentRun = field(init=False, repr=False)
    """``job.run`` as a plain attribute (a job's run is never replaced): read ~5 times per
    child by its manager, and a property read is a Python call from C on 3.11 (~700
    instructions against ~80; docs/performance.md, session 15)."""
    agent_id: str = field(init=False, repr=False)
    """``job.run.agent_id``, the same way."""

    def __post_init__(self) -> None:
        self.run = run = self.job.run
        self.agent_id = run.agent_id

    @property
    def background(self) -> bool:
        return self.run.is_background  # (placement changes: read each time)

    def move_to_background(self) -> None:
        """The child goes on by itself and its parent no longer waits: its parent's interrupt
        no longer reaches it, and from its next permission ask on it counts as a background
        agent (asks routed or denied) and its new shells are bounded."""
        self.job.run.is_background = True
        self.state.extra["auto_backgrounded"] = True
        abort = self.job.ctx.abort
        if isinstance(abort, LinkedAbortSignal):
            abort.unlink()
        self.last_progress = time.monotonic()

    def stall(self, stalled_ms: int) -> None:
        """No progress for too long: abort it; it ends failed with its partial result."""
        self.stalled_ms = stalled_ms
        self.job.ctx.abort.abort(f"stalled: no progress for {stalled_ms} ms")

    def settle(self) -> tuple[AgentStatus, str | None]:
        """Decide the terminal status and error (see the module docstring); the run's record
        is set to them, and they are returned for the registry and the durable record."""
        run = self.job.run
        if self.stopped:
            run.status = "killed"
        elif run.status == "running" and self.task.cancelled():
            run.status, run.reason = "killed", "cancelled"
        if self.stalled_ms is not None:
            run.status, run.error = "failed", f"stalled: no progress for {self.stalled_ms} ms"
        if run.status == "running":  # its task ended before its loop did (a crashed hook)
            run.status = "failed"
        return run.status, run.error
