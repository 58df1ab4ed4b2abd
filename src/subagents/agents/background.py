"""``BackgroundAgentManager``: every child as a task — foreground, background, auto-backgrounded.

Each child is registered as a ``local_agent`` task whose id is the agent id, so anything running
can be listed, waited for (TaskOutput) and stopped (TaskStop), whichever path it took:

* foreground: the parent waits; a child still running after ``auto_background_ms`` is moved to
  the background (its abort signal is unlinked from the parent's, its permission prompts become
  auto-denied) and the parent gets ``async_launched`` and goes on;
* background: the tool returns ``async_launched`` at once; the child has its own abort signal,
  so it survives the parent's interrupt and stops only by TaskStop or shutdown. A background
  child that makes no progress for ``stall_timeout_ms`` is failed with its partial result.

When a child ends, ``_finalize`` runs exactly once: the full report goes to the task's output
file, the task reaches its terminal status (one transition, guarded by the registry), and — for a
background child — one notification is queued in the parent's inbox (its id is derived from the
child's id, and the registry's ``notified`` flag is claimed first, so it is delivered once). The
parent reads it at its next boundary, never in the middle of a model output.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagents.abort import LinkedAbortSignal
from subagents.agents import durability
from subagents.agents.lifecycle import run_child
from subagents.agents.notifications import AgentNotice, notification_id, render_notification
from subagents.agents.runner import AgentJob, AgentRun
from subagents.agents.runtime import AgentRuntime
from subagents.agents.tasks import (
    TaskOutputError,
    TaskRegistry,
    TaskState,
    UnknownTaskError,
    open_output_file,
)
from subagents.agents.verification import VERIFICATION_AGENT_TYPE, verification_metadata
from subagents.events import NotificationEvent, ProgressEvent
from subagents.loop.inbox import Inbox, InboxItem
from subagents.loop.query import LoopOutcome, LoopStats
from subagents.store.capabilities import StopRequests
from subagents.store.durable import DurableRecords, Written
from subagents.store.protocol import Store
from subagents.store.records import is_visible
from subagents.tools.base import CallInfo, ToolError, ToolOutput

log = logging.getLogger(__name__)

KILL_WAIT_S = 5.0


@dataclass(kw_only=True)
class _Child:
    job: AgentJob
    task: asyncio.Task[LoopOutcome]
    state: TaskState
    activity: tuple[int, int, int] = (0, 0, 0)
    last_progress: float = field(default_factory=time.monotonic)
    stalled_ms: int | None = None
    finalized: bool = False
    check_timer: asyncio.TimerHandle | None = None
    """The next stall check of a background child (see ``_supervise``)."""

    @property
    def run(self) -> AgentRun:
        return self.job.run

    @property
    def background(self) -> bool:
        return self.job.run.is_background


class BackgroundAgentManager:
    """Launches, watches, notifies and stops the children of one session."""

    def __init__(
        self,
        runtime: AgentRuntime,
        *,
        registry: TaskRegistry,
        tasks_dir: Path,
        root_inbox: Inbox,
    ) -> None:
        self.runtime = runtime
        self.registry = registry
        self.tasks_dir = tasks_dir
        self.root_inbox = root_inbox
        self.inboxes: dict[str, Inbox] = {}
        self.names: dict[str, str] = {}
        self._children: dict[str, _Child] = {}
        self.on_finalized: list[Callable[[AgentRun, TaskState], None]] = []
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self.records: DurableRecords | None = None
        """Durable sidecars (set by the session when a store is configured)."""
        self._pending_writes: set[Written] = set()
        self._running_background = 0
        """Background children not yet finalized: ``expecting_notifications`` is asked at
        every wake-up of a waiting inbox, and a scan of 1,000 children each time adds up."""
        registry.register_kind("local_agent", self._kill)
        registry.on_terminal(self._wake_waiters)

    # -- registration ----------------------------------------------------------------------

    def notify(self, owner_agent_id: str, item: InboxItem) -> None:
        """Deliver into the owner's inbox, or the root's when the owner has ended."""
        inbox = self.inboxes.get(owner_agent_id, self.root_inbox)
        inbox.put(item)

    def running_background(self) -> list[TaskState]:
        return [c.state for c in self._children.values() if c.background and not c.finalized]

    def expecting_notifications(self) -> bool:
        """Background children still running, or finished with their notification on its way
        (waiting for the durable terminal write)."""
        return bool(self._running_background or self._pending_writes)

    # -- the two paths ---------------------------------------------------------------------

    def launch(self, job: AgentJob, *, name: str | None = None) -> ToolOutput:
        """Start a background child and return ``async_launched`` at once."""
        if not job.run.is_background:
            raise ValueError(f"launch: {job.run.agent_id} was assembled as a foreground child")
        child = self._start(job, name=name)
        self._supervise(child)
        return self._launched_output(child, auto=False)

    async def run_foreground(
        self, job: AgentJob, info: CallInfo, *, name: str | None = None
    ) -> ToolOutput:
        """Run a child while the parent waits, with progress; may move it to the background."""
        child = self._start(job, name=name)
        try:
            moved = await self._wait_foreground(child)
        except asyncio.CancelledError:
            if not _being_cancelled():
                # The child's own task was cancelled, not the parent: it counts as killed.
                self._finalize(child)
                return completed_output(child.run)
            job.ctx.abort.abort("parent aborted")
            await asyncio.gather(child.task, return_exceptions=True)
            self._finalize(child)
            raise
        if moved:
            return self._launched_output(child, auto=True)
        self._finalize(child)
        return completed_output(child.run)

    def _start(self, job: AgentJob, *, name: str | None) -> _Child:
        run, runtime = job.run, self.runtime
        background = run.is_background
        state = self.registry.create(
            "local_agent",
            description=run.description,
            owner_agent_id=run.ref.parent_agent_id or "",
            session_id=runtime.session_id,
            # Only a background child needs an output file; a foreground one answers directly
            # (and gets one if it is moved to the background).
            output_dir=self.tasks_dir if background else None,
            task_id=run.agent_id,
        )
        state.extra["agent_type"] = run.agent_type
        runtime.register(run)
        runtime.running_children += 1
        if job.inbox is None:
            job.inbox = Inbox()
        self.inboxes[run.agent_id] = job.inbox
        if name:
            self.names[name] = run.agent_id
        self.registry.start(run.agent_id)
        if self.records is not None:
            durability.started(self.records, job, state)
            self._track_activity(job, self.records)
        loop = asyncio.get_running_loop()
        task = loop.create_task(run_child(runtime, job), name=f"agent:{run.agent_id}")
        child = _Child(job=job, task=task, state=state)
        self._children[run.agent_id] = child
        return child

    @staticmethod
    def _track_activity(job: AgentJob, records: DurableRecords) -> None:
        previous, agent_id = job.on_turn, job.run.agent_id

        def on_turn(stats: LoopStats) -> None:
            if previous is not None:
                previous(stats)
            records.activity(agent_id)

        job.on_turn = on_turn

    async def _wait_foreground(self, child: _Child) -> bool:
        """Wait for a foreground child; True when it was moved to the background instead."""
        config = self.runtime.config
        loop = child.task.get_loop()
        started = time.monotonic()
        auto_s = config.auto_background_ms / 1000 if config.auto_background_ms > 0 else None
        next_progress = config.progress_after_ms / 1000
        while True:
            elapsed = time.monotonic() - started
            waits = [next_progress - elapsed]
            if auto_s is not None:
                waits.append(auto_s - elapsed)
            if await _wait_done(loop, child.task, max(0.0, min(waits))):
                child.task.result()
                return False
            elapsed = time.monotonic() - started
            if auto_s is not None and elapsed >= auto_s:
                self._move_to_background(child)
                return True
            if elapsed >= next_progress:
                emit_progress(child.job)
                next_progress = elapsed + 1.0

    def _move_to_background(self, child: _Child) -> None:
        """Auto-background: the child keeps running on its own; the parent goes on."""
        run = child.run
        # The one place a child's placement changes: its frame, its permission checker (asks
        # are then denied or routed) and its shells read it from here.
        run.is_background = True
        child.state.extra["auto_backgrounded"] = True
        abort = child.job.ctx.abort
        if isinstance(abort, LinkedAbortSignal):
            abort.unlink()  # from now on the parent's interrupt no longer reaches it
        child.last_progress = time.monotonic()
        try:
            child.state.output_path = open_output_file(self.tasks_dir, run.agent_id)
        except TaskOutputError:
            log.exception("no output file for auto-backgrounded %s", run.agent_id)
        if self.records is not None:
            output = child.state.output_path
            durability.backgrounded(self.records, run.agent_id, str(output) if output else None)
        self._supervise(child)

    # -- supervision -----------------------------------------------------------------------

    def _supervise(self, child: _Child) -> None:
        """Watch a background child: a stall check every ``check_s`` while it runs, and
        ``_finalize`` as soon as its task is done.

        A done-callback and one timer rather than a supervising task per child: with 1,000
        children a task each (its coroutine, futures and per-wait sets) costs CPU per check and
        gives the garbage collector twice the live objects to scan."""
        self._running_background += 1
        stall_s = self.runtime.config.stall_timeout_ms / 1000
        check_s = max(0.05, min(5.0, stall_s / 4))
        loop = child.task.get_loop()
        child.check_timer = loop.call_later(check_s, self._scheduled_check, child, stall_s, check_s)

        def done(_: object) -> None:
            self._finalize(child)

        child.task.add_done_callback(done)

    def _scheduled_check(self, child: _Child, stall_s: float, check_s: float) -> None:
        """One stall check, then the next one is scheduled (a method, not a closure that
        re-schedules itself: that would be a reference cycle)."""
        if child.task.done() or child.finalized:
            return
        self._check_stall(child, stall_s)
        loop = child.task.get_loop()
        child.check_timer = loop.call_later(check_s, self._scheduled_check, child, stall_s, check_s)

    def _check_stall(self, child: _Child, stall_s: float) -> None:
        stats = child.run.stats
        activity = (stats.num_turns, stats.tool_use_count, stats.usage.total)
        now = time.monotonic()
        if activity != child.activity:
            child.activity, child.last_progress = activity, now
            self._write_progress(child)
            return
        if stall_s > 0 and now - child.last_progress >= stall_s and child.stalled_ms is None:
            child.stalled_ms = int((now - child.last_progress) * 1000)
            child.job.ctx.abort.abort(f"stalled: no progress for {child.stalled_ms} ms")

    def _write_progress(self, child: _Child) -> None:
        path = child.state.output_path
        if path is None:
            return
        stats = child.run.stats
        line = (
            f"[progress] turns={stats.num_turns} tool_uses={stats.tool_use_count} "
            f"tokens={stats.usage.total} last={stats.activities[-1] if stats.activities else '-'}\n"
        )
        _append(path, line)

    # -- the end ---------------------------------------------------------------------------

    def _finalize(self, child: _Child) -> None:
        """Exactly once per child: output file, terminal status, notification, bookkeeping."""
        if child.finalized:
            return
        child.finalized = True
        if child.check_timer is not None:
            child.check_timer.cancel()
            child.check_timer = None
            self._running_background -= 1
        run, state = child.run, child.state
        # A finished child is no longer the manager's business (its record, task state and
        # result live on); dropping it lets its loop, messages and tools be freed.
        self._children.pop(run.agent_id, None)
        self.runtime.running_children -= 1
        self.inboxes.pop(run.agent_id, None)
        if child.task.cancelled() and run.status == "running":
            run.status, run.reason = "killed", "cancelled"
        status, error = run.status, run.error
        if child.stalled_ms is not None:
            status, error = "failed", f"stalled: no progress for {child.stalled_ms} ms"
            run.status, run.error = status, error
        if status == "running":
            status = "failed"
        if state.output_path is not None:
            _append(state.output_path, f"\n{run.result_text}\n" if run.result_text else "")
        state.extra["stats"] = run.summary()
        for callback in self.on_finalized:
            callback(run, state)
        self.registry.finish(run.agent_id, status, result=run.result_text, error=error)
        self._persist_then_notify(child)
        for done in self.runtime.on_child_done:
            done(run)

    def _persist_then_notify(self, child: _Child) -> None:
        """The terminal record is durable before the parent hears of the child."""
        if self.records is None:
            if child.background:
                self._notify_parent(child)
            return
        written = durability.finished(self.records, child.run, child.state)
        if child.background:
            self._pending_writes.add(written)

        def after(future: Written) -> None:
            if child.background:
                self._pending_writes.discard(future)
                self._notify_parent(child)
                self.root_inbox.wake()

        written.add_done_callback(after)

    async def drain_writes(self) -> None:
        """Wait for terminal writes in flight (and the notifications that follow them)."""
        while self._pending_writes:
            await asyncio.wait(set(self._pending_writes))
            await asyncio.sleep(0)

    async def poll_stop_requests(self, interval_s: float = 0.5) -> None:
        """Honour ``subagents tasks stop`` from another process: it sets the durable flag."""
        if self.records is None:
            return
        records = self.records
        while True:
            await asyncio.sleep(interval_s)
            live = [agent_id for agent_id, c in self._children.items() if not c.finalized]
            for agent_id in _stop_requested(records.store, records.project_path, live):
                await self.registry.kill(agent_id)

    def _notify_parent(self, child: _Child) -> None:
        run, state = child.run, child.state
        if not self.registry.mark_notified(run.agent_id):
            return
        notice = AgentNotice(
            task_id=run.agent_id,
            description=run.description,
            agent_type=run.agent_type,
            status=state.status,
            result=run.result_text,
            error=state.error,
            output_file=str(state.output_path) if state.output_path else None,
            tool_uses=run.stats.tool_use_count,
            total_tokens=run.stats.usage.total,
            duration_ms=run.duration_ms,
            worktree_path=run.worktree_fields.get("worktreePath"),
            worktree_branch=run.worktree_fields.get("worktreeBranch"),
        )
        text = render_notification(notice, max_result=self.runtime.config.task_max_output)
        owner = run.ref.parent_agent_id or ""
        self.notify(owner, InboxItem(id=notification_id(run.agent_id), text=text))
        self.runtime.emit(
            NotificationEvent(
                agent=run.ref,  # the child the notification is about
                task_id=run.agent_id,
                status=state.status,
                summary=f'Agent "{run.description}" {state.status}',
            )
        )

    async def _kill(self, state: TaskState) -> None:
        child = self._children.get(state.id)
        if child is None:
            return
        child.job.ctx.abort.abort("stopped by TaskStop")
        await asyncio.wait({child.task}, timeout=KILL_WAIT_S)
        if not child.task.done():
            child.task.cancel("stopped by TaskStop")
            await asyncio.gather(child.task, return_exceptions=True)
        child.run.status = "killed"
        self._finalize(child)

    # -- TaskOutput / TaskStop -------------------------------------------------------------

    def resolve(self, target: str) -> str:
        """A task id from an id or an agent name."""
        task_id = self.names.get(target, target)
        if self.registry.find(task_id) is None:
            self._refuse_foreign(task_id)
            raise ToolError(f"No task found with id or name {target!r}")
        return task_id

    def _refuse_foreign(self, task_id: str) -> None:
        """SPEC §9: a run of another session or project is refused as such, never acted on."""
        records = self.records
        if records is None:
            return
        try:
            record = records.store.get(task_id)
        except Exception:  # not a valid id, unreadable record: "not found" says enough
            return
        if record is not None and not is_visible(
            record, session_id=records.session_id, project_path=records.project_path
        ):
            raise ToolError(
                f"Task {task_id} belongs to another session or project; it cannot be queried "
                "or stopped from here (runs are visible only to their own session and project)"
            )

    async def output(self, target: str, *, block: bool, timeout_s: float) -> ToolOutput:
        task_id = self.resolve(target)
        state = self.registry.get(task_id)
        if block and not state.terminal:
            await self.wait_terminal(task_id, timeout_s)
        return task_output(state, self._full_text(state))

    async def wait_terminal(self, task_id: str, timeout_s: float) -> bool:
        """Wait until the task is terminal (any type); False on timeout."""
        if self.registry.get(task_id).terminal:
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(task_id, []).append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout_s)
        except TimeoutError:
            return False
        finally:
            waiters = self._waiters.get(task_id, [])
            if waiter in waiters:
                waiters.remove(waiter)
        return True

    def _wake_waiters(self, state: TaskState) -> None:
        for waiter in self._waiters.pop(state.id, []):
            if not waiter.done():
                waiter.set_result(None)

    def _full_text(self, state: TaskState) -> str:
        if state.type == "local_agent":
            return state.result or ""
        path = state.output_path
        if path is None or not path.exists():
            return ""
        return path.read_text(encoding="utf-8", errors="replace")

    async def stop(self, target: str) -> ToolOutput:
        task_id = self.resolve(target)
        try:
            stopped = await self.registry.kill(task_id)
        except UnknownTaskError as exc:
            raise ToolError(str(exc)) from exc
        state = self.registry.get(task_id)
        if not stopped:
            return ToolOutput(content=f"Task {task_id} had already ended ({state.status}).")
        return ToolOutput(
            content=f"Task {task_id} ({state.description}) stopped.",
            metadata={"task_id": task_id, "status": state.status},
        )

    async def shutdown(self) -> None:
        """Kill every running child (the session is ending)."""
        for state in list(self.registry.running()):
            if state.type == "local_agent":
                try:
                    await self.registry.kill(state.id)
                except Exception:
                    log.exception("killing %s at shutdown failed", state.id)

    def _launched_output(self, child: _Child, *, auto: bool) -> ToolOutput:
        run, state = child.run, child.state
        can_read = bool({"Read", "Bash"} & set(child.job.parent_tool_names))
        payload: dict[str, Any] = {
            "status": "async_launched",
            "agentId": run.agent_id,
            "description": run.description,
            "prompt": run.prompt,
            "outputFile": str(state.output_path),
            "canReadOutputFile": can_read,
        }
        lead = (
            "The agent ran past the auto-background limit and now continues in the background."
            if auto
            else "Async agent launched successfully."
        )
        text = (
            f"{lead}\nagentId: {run.agent_id}\n"
            "You will be notified automatically when it completes; do not poll. "
            f"Use TaskOutput(task_id={run.agent_id!r}) only if you need its full result, "
            f"or TaskStop to stop it. Its output file: {state.output_path}"
        )
        return ToolOutput(content=text, metadata=payload)


def task_output(state: TaskState, full_text: str) -> ToolOutput:
    payload = {
        "task_id": state.id,
        "task_type": state.type,
        "status": state.status,
        "description": state.description,
        "result": full_text,
        "error": state.error,
    }
    lines = [f"Task {state.id} ({state.type}): {state.status}"]
    if state.error:
        lines.append(f"Error: {state.error}")
    if full_text:
        lines += ["", full_text]
    elif not state.terminal:
        lines.append("(still running; no result yet)")
    return ToolOutput(content="\n".join(lines), metadata=payload)


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _append(path: Path, text: str) -> None:
    if not text:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def emit_progress(job: AgentJob) -> None:
    run = job.run
    stats = run.stats
    job.ctx.emit(
        ProgressEvent(
            agent=run.ref,
            subtype="agent_progress",
            data={
                "description": run.description,
                "tool_use_count": stats.tool_use_count,
                "total_tokens": stats.usage.total,
                "latest_input_tokens": stats.latest_input_tokens,
                "recent_activities": list(stats.activities),
                "elapsed_ms": int((time.monotonic() - run.started) * 1000),
            },
        )
    )


def completed_payload(run: AgentRun) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "status": "completed",
        "prompt": run.prompt,
        "content": [{"type": "text", "text": run.result_text}],
        "totalToolUseCount": run.stats.tool_use_count,
        "totalDurationMs": run.duration_ms,
        "totalTokens": run.stats.usage.total,
        "agentId": run.agent_id,
        "agentType": run.agent_type,
        "model": run.model,
    }
    payload.update(run.worktree_fields)
    if run.agent_type == VERIFICATION_AGENT_TYPE:
        payload["verification"] = verification_metadata(run)
    return payload


def completed_output(run: AgentRun) -> ToolOutput:
    """The ``completed`` result of a child that ran in the foreground."""
    payload = completed_payload(run)
    trailer = (
        f"[agentId: {run.agent_id} · type: {run.agent_type} · tool uses: "
        f"{run.stats.tool_use_count} · tokens: {run.stats.usage.total} · "
        f"duration: {run.duration_ms} ms]"
    )
    if run.worktree_fields:
        where = run.worktree_fields.get("worktreePath", "")
        branch = run.worktree_fields.get("worktreeBranch", "")
        trailer += f"\n[worktree kept: {where} (branch {branch})]"
    if run.status == "completed":
        return ToolOutput(content=f"{run.result_text}\n\n{trailer}", metadata=payload)
    reason = run.error or run.reason
    partial = f"\n\nPartial report:\n{run.result_text}" if run.result_text else ""
    payload["status"] = run.status
    headline = f"Agent {run.agent_type} ended without completing ({reason})."
    return ToolOutput(content=f"{headline}{partial}\n\n{trailer}", is_error=True, metadata=payload)


def _stop_requested(store: Store, project_path: str, live: list[str]) -> list[str]:
    """Which of ``live`` another process asked to stop: one listing where the store offers it
    (``capabilities.StopRequests``), else a read of each record."""
    if not live:
        return []
    if isinstance(store, StopRequests):
        try:
            requested = store.stop_requested_ids(project_path)
        except OSError:
            return []
        return [agent_id for agent_id in live if agent_id in requested]
    stopped: list[str] = []
    for agent_id in live:
        try:
            record = store.get(agent_id)
        except Exception:
            continue
        if record is not None and record.stop_requested:
            stopped.append(agent_id)
    return stopped


async def _wait_done(
    loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], within_s: float
) -> bool:
    """Whether ``task`` finished within ``within_s`` seconds (it is never cancelled here).

    ``asyncio.wait`` for a single task, without its per-call set, and without looking up the
    running loop (on Python 3.11 each lookup is a ``getpid`` system call)."""
    if task.done():
        return True
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: object) -> None:
        if not waiter.done():
            waiter.set_result(None)

    task.add_done_callback(wake)
    timer = loop.call_later(within_s, wake, None)
    try:
        await waiter
    finally:
        timer.cancel()
        task.remove_done_callback(wake)
    return task.done()
