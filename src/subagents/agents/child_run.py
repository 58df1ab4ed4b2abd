"""A child's lifecycle around its loop: SubagentStart, the denial breaker, SubagentStop.

Every child — sync, background, fork — runs through ``run_child``, so the guarantees hold on
every path: SubagentStart fires before the first model call (its output is shown to the child),
and SubagentStop fires exactly once afterwards, whether the child completed (the loop's Stop hook
point fires it, and may be blocked to keep the child going), failed, was killed or was cancelled
(``ensure_stopped`` in the ``finally`` fires it only if nothing did). A child whose permission
denials trip the breaker is aborted at its next turn instead of retrying forever.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from subagents.abort import LinkedAbortSignal
from subagents.agents.agent_run import AgentJob, run_agent
from subagents.agents.runtime import AgentRuntime
from subagents.loop.query import LoopOutcome, LoopStats
from subagents.messages import ContentBlock, text_block, tool_uses
from subagents.permissions.checker import PermissionChecker
from subagents.store import durable
from subagents.store.durable import DurableRecords

_log = logging.getLogger(__name__)


async def run_child(runtime: AgentRuntime, job: AgentJob) -> LoopOutcome:
    hooks = runtime.hooks
    run = job.run
    transcript = job.transcript or ""
    if hooks is not None:
        extra = await hooks.subagent_start(run.agent_id, run.agent_type, transcript_path=transcript)
        if extra:
            _add_context(job, extra)
    _watch_breaker(job)
    try:
        return await run_agent(job)
    finally:
        # Turn callbacks close over the job (a reference cycle): a finished child's objects
        # are then freed at once by reference counting, not by a full collection later.
        job.on_turn = None
        abort = job.ctx.abort
        if isinstance(abort, LinkedAbortSignal):
            abort.unlink()  # the parent's signal forgets a child that has ended
        if job.mcp is not None:
            await job.mcp.close()  # the child's own MCP servers: their processes end here
        if job.worktree is not None:
            await _settle_worktree(job)
        if hooks is not None:
            try:
                await hooks.ensure_stopped(run.agent_id, run.agent_type, transcript)
            except Exception:  # a crashed hook must not hide the child's own outcome
                _log.exception("SubagentStop hook failed for %s", run.agent_id)


async def _settle_worktree(job: AgentJob) -> None:
    """Success with no change removes the worktree; anything else keeps it (and says where)."""
    run = job.run
    assert job.worktree is not None
    try:
        from subagents.worktrees.git import finish_worktree  # only an isolated child has one

        outcome = await finish_worktree(job.worktree, success=run.status == "completed")
    except Exception as exc:  # never lose the child's work over a cleanup error: keep it
        _log.exception("settling the worktree of %s failed", run.agent_id)
        run.worktree_fields = {"worktreePath": str(job.worktree.path)}
        run.worktree_outcome = {"kept": True, "reason": f"cleanup failed: {exc}"}
        return
    run.worktree_fields = outcome.result_fields()
    run.worktree_outcome = outcome.to_dict()


def _add_context(job: AgentJob, text: str) -> None:
    first = job.messages[-1]
    content = first["content"]
    blocks: list[ContentBlock] = (
        [text_block(content)] if isinstance(content, str) else list(content)
    )
    blocks.append(text_block(text))
    first["content"] = blocks


def _watch_breaker(job: AgentJob) -> None:
    checker = job.frame.permissions
    if checker is None:
        return
    watch = job.on_turn
    if type(watch) is TurnWatch and watch.checker is None:
        watch.checker = checker  # the child's activity watch keeps the breaker too: one call
    else:
        job.on_turn = TurnWatch(job, watch, checker=checker)


class TurnWatch:
    """A child's turn callback, run after every model call: its activity noted in its record
    (``records``, throttled: ``DurableRecords.activity`` writes at most once per
    ``ACTIVITY_INTERVAL_S``, so until ``due`` nothing is asked of it) and, with ``checker``,
    the denial breaker (a child whose denials tripped it is aborted). One object for both: two
    chained callbacks were two Python calls per model call. Slots rather than a closure: one
    tracked object per child instead of a function, its cell tuple and a cell per variable
    (the garbage collector visits each, 1,000 children or not)."""

    __slots__ = ("agent_id", "checker", "due", "job", "previous", "records")

    def __init__(
        self,
        job: AgentJob,
        previous: Callable[[LoopStats], None] | None,
        *,
        records: DurableRecords | None = None,
        checker: PermissionChecker | None = None,
    ) -> None:
        self.job, self.previous, self.records, self.checker = job, previous, records, checker
        self.agent_id = job.run.agent_id  # (once: this runs after every model call)
        self.due = time.monotonic() + durable.ACTIVITY_INTERVAL_S if records is not None else 0.0
        """Before this, ``records.activity`` would write nothing (the record was just written
        at start, or at the last activity write)."""

    def __call__(self, stats: LoopStats) -> None:
        if self.previous is not None:
            self.previous(stats)
        records = self.records
        if records is not None:
            now = time.monotonic()
            if now >= self.due:
                self.due = now + durable.ACTIVITY_INTERVAL_S
                records.activity(self.agent_id)
        checker = self.checker
        # Only a child that goes on calling tools is stopped; a final answer still lands.
        if (
            checker is not None
            and checker.breaker_tripped(self.agent_id)
            and tool_uses(self.job.messages[-1])
        ):
            self.job.ctx.abort.abort(
                "stopped: it kept retrying calls that were denied (denial breaker)"
            )
