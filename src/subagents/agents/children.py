"""``Children``: the lifecycle of a session's children — start, placement, the end, stops.

Each child is registered as a ``local_agent`` task whose id is the agent id, so anything running
can be listed, waited for (TaskOutput, ``task_service``) and stopped (TaskStop), whichever path
it took:

* background (``launch``): the tool returns ``async_launched`` at once; the child has its own
  abort signal, so it survives the parent's interrupt and stops only by TaskStop or shutdown;
  the ``Supervisor`` watches it for progress and stalls;
* foreground (``foreground.run_foreground``): the parent waits; a child still running after
  ``auto_background_ms`` is moved to the background (``move_to_background``).

When a child ends, ``finalize`` runs exactly once: its terminal status is settled
(``Child.settle``), the full report goes to the task's output file, the task reaches its terminal
status (one transition, guarded by the registry), and — for a background child — the terminal
record is made durable *before* one notification is queued in the parent's inbox (its id is
derived from the child's id, and the registry's ``notified`` flag is claimed first, so it is
delivered once). The parent reads it at its next boundary, never in the middle of a model output.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from subagents.agents import durability
from subagents.agents.agent_run import AgentJob, AgentRun
from subagents.agents.child_run import TurnWatch
from subagents.agents.child_state import Child
from subagents.agents.executor import LOCAL, Executor
from subagents.agents.notifications import notification_id, render_notification
from subagents.agents.results import launched_output, notice_for
from subagents.agents.runtime import AgentRuntime
from subagents.agents.supervision import Supervisor, append_output
from subagents.agents.tasks import TaskOutputError, TaskRegistry, TaskState, create_output_file
from subagents.events import NotificationEvent, SystemEvent, discard
from subagents.loop.inbox import Inbox, InboxItem
from subagents.store.capabilities import StopRequests
from subagents.store.durable import DurableRecords, Written
from subagents.store.protocol import Store
from subagents.tools.base import ToolOutput

log = logging.getLogger(__name__)

KILL_WAIT_S = 5.0


class Children:
    """The children of one session: started, moved, finalized, notified and stopped here."""

    def __init__(
        self,
        runtime: AgentRuntime,
        *,
        registry: TaskRegistry,
        tasks_dir: Path,
        root_inbox: Inbox,
        executor: Executor = LOCAL,
    ) -> None:
        self.runtime = runtime
        self.executor = executor
        """Where children's loops run (``agents.executor``; a cluster for background ones)."""
        self.registry = registry
        self.tasks_dir = tasks_dir
        self.root_inbox = root_inbox
        self.inboxes: dict[str, Inbox] = {}
        self.names: dict[str, str] = {}
        """Names given at launch (``Agent(name=...)``) → agent ids."""
        self.supervisor = Supervisor(runtime.config.stall_timeout_ms)
        self.on_finalized: list[Callable[[AgentRun, TaskState], None]] = []
        self.records: DurableRecords | None = None
        """Durable sidecars (set by the session when a store is configured)."""
        self._live: dict[str, Child] = {}
        self._pending_writes: set[Written] = set()
        registry.register_kind("local_agent", self._kill)

    # -- looking children up ------------------------------------------------------------------

    def notify(self, owner_agent_id: str, item: InboxItem) -> None:
        """Deliver into the owner's inbox, or the root's when the owner has ended."""
        inbox = self.inboxes.get(owner_agent_id, self.root_inbox)
        inbox.put(item)

    def running_background(self) -> list[TaskState]:
        return [c.state for c in self._live.values() if c.background and not c.finalized]

    def expecting_notifications(self) -> bool:
        """Background children still running, or finished with their notification on its way
        (waiting for the durable terminal write)."""
        return bool(self.supervisor.watched or self._pending_writes)

    # -- start and placement ------------------------------------------------------------------

    def launch(self, job: AgentJob, *, name: str | None = None) -> ToolOutput:
        """Start a background child and return ``async_launched`` at once."""
        if not job.run.is_background:
            raise ValueError(f"launch: {job.run.agent_id} was assembled as a foreground child")
        child = self.start(job, name=name)
        self.supervisor.watch(child, self.finalize)
        return launched_output(child, auto=False)

    def start(self, job: AgentJob, *, name: str | None = None) -> Child:
        """Register the child (task, run, inbox, name, durable record) and start its task."""
        run, runtime = job.run, self.runtime
        agent_id = run.agent_id
        state = self.registry.create(
            "local_agent",
            description=run.description,
            owner_agent_id=run.ref.parent_agent_id or "",
            session_id=runtime.session_id,
            # Only a background child needs an output file; a foreground one answers directly
            # (and gets one if it is moved to the background).
            output_dir=self.tasks_dir if run.is_background else None,
            task_id=agent_id,
        )
        state.extra["agent_type"] = run.agent_type
        runtime.register(run)
        runtime.running_children += 1
        if job.inbox is None:
            job.inbox = Inbox()
        self.inboxes[agent_id] = job.inbox
        if name:
            self.names[name] = agent_id
        self.registry.start(agent_id)
        if runtime.sink is not discard:  # nobody watching: no event built per child
            runtime.emit(
                SystemEvent(
                    agent=run.ref,
                    subtype="agent_started",
                    data={
                        "task_id": agent_id,
                        "description": run.description,
                        "task_type": "local_agent",
                        "tool_use_id": run.tool_use_id,
                        "background": run.is_background,
                    },
                )
            )
        if self.records is not None:
            durability.started(self.records, job, state)
            _track_activity(job, self.records)
        child = Child(job=job, task=self.executor.start(runtime, job), state=state)
        self._live[agent_id] = child
        return child

    def move_to_background(self, child: Child) -> ToolOutput:
        """Auto-background: the child keeps running on its own; the parent goes on."""
        child.move_to_background()
        run = child.run
        try:
            child.state.output_file = create_output_file(self.tasks_dir, run.agent_id)
        except TaskOutputError:
            log.exception("no output file for auto-backgrounded %s", run.agent_id)
        if self.records is not None:
            durability.backgrounded(self.records, run.agent_id, child.state.output_file)
        self.supervisor.watch(child, self.finalize)
        return launched_output(child, auto=True)

    # -- the end --------------------------------------------------------------------------------

    def finalize(self, child: Child) -> None:
        """Exactly once per child: terminal status, output file, notification, bookkeeping."""
        if child.finalized:
            return
        child.finalized = True
        self.supervisor.forget(child)
        run, state = child.run, child.state
        agent_id = run.agent_id
        # A finished child is no longer this manager's business (its record, task state and
        # result live on); dropping it lets its loop, messages and tools be freed.
        self._live.pop(agent_id, None)
        self.runtime.running_children -= 1
        self.inboxes.pop(agent_id, None)
        status, error = child.settle()
        if state.output_file is not None:
            append_output(state.output_file, f"\n{run.result_text}\n" if run.result_text else "")
        state.extra["stats"] = run.summary()
        for callback in self.on_finalized:
            callback(run, state)
        self.registry.finish(agent_id, status, result=run.result_text, error=error)
        self._persist_then_notify(child)
        for done in self.runtime.on_child_done:
            done(run)

    def _persist_then_notify(self, child: Child) -> None:
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

    def _notify_parent(self, child: Child) -> None:
        run, state = child.run, child.state
        agent_id = run.agent_id
        if not self.registry.mark_notified(agent_id):
            return
        notice = notice_for(child)
        text = render_notification(notice, max_result=self.runtime.config.task_max_output)
        self.notify(
            run.ref.parent_agent_id or "", InboxItem(id=notification_id(agent_id), text=text)
        )
        if self.runtime.sink is discard:
            return
        self.runtime.emit(
            NotificationEvent(
                agent=run.ref,  # the child the notification is about
                task_id=agent_id,
                status=state.status,
                summary=f'Agent "{run.description}" {state.status}',
                output_file=notice.output_file,
                usage={
                    "total_tokens": notice.total_tokens,
                    "tool_uses": notice.tool_uses,
                    "duration_ms": notice.duration_ms,
                },
            )
        )

    async def drain_writes(self) -> None:
        """Wait for terminal writes in flight (and the notifications that follow them). A
        write whose future is a closed loop's (a held session that outlived an
        ``asyncio.run``) is not waited for: its callback can never run, and the records'
        ``drain`` that follows waits for the write itself (``DurableRecords._left_loop``)."""
        self._pending_writes = {f for f in self._pending_writes if not f.get_loop().is_closed()}
        while self._pending_writes:
            await asyncio.wait(set(self._pending_writes))
            await asyncio.sleep(0)

    # -- stops ----------------------------------------------------------------------------------

    async def _kill(self, state: TaskState) -> None:
        """The registry's kill of a ``local_agent`` task (TaskStop, ``tasks stop``, shutdown)."""
        child = self._live.get(state.id)
        if child is None:
            return
        child.job.ctx.abort.abort("stopped by TaskStop")
        await asyncio.wait({child.task}, timeout=KILL_WAIT_S)
        if not child.task.done():
            child.task.cancel("stopped by TaskStop")
            await asyncio.gather(child.task, return_exceptions=True)
        if not child.finalized:  # it may have ended by itself meanwhile: that end stands
            child.stopped = True
        self.finalize(child)

    async def poll_stop_requests(self, interval_s: float = 0.5) -> None:
        """Honour ``subagents tasks stop`` from another process: it sets the durable flag."""
        if self.records is None:
            return
        records = self.records
        while True:
            await asyncio.sleep(interval_s)
            live = [agent_id for agent_id, c in self._live.items() if not c.finalized]
            for agent_id in _stop_requested(records.store, records.project_path, live):
                await self.registry.kill(agent_id)

    async def shutdown(self) -> None:
        """Kill every running child (the session is ending)."""
        for state in list(self.registry.running()):
            if state.type == "local_agent":
                try:
                    await self.registry.kill(state.id)
                except Exception:
                    log.exception("killing %s at shutdown failed", state.id)


def _track_activity(job: AgentJob, records: DurableRecords) -> None:
    """The child's activity in its record after each model call (``child_run.TurnWatch``,
    which its denial breaker joins when it starts)."""
    job.on_turn = TurnWatch(job, job.on_turn, records=records)


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
