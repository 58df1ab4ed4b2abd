"""Durable records of child runs: what the background manager writes, and when.

Per child (SPEC §8-§9), through the session's ``Store``. With a store that takes an owner's whole
records (``FileStore.prepare_owned``) the records are built, encoded and staged here on the event
loop and only the disk waits run on the ``DurableWriter`` thread (``store.pipeline``); other
stores get their calls on that thread, in order:

* at start — a ``running`` sidecar with the owner's process identity, the lineage and the frozen
  config snapshot (model, permission mode, tools, system prompt, max turns, isolation), so a
  resume never re-reads a definition and a crash leaves a record to reconcile;
* while running — ``lastActiveAt`` at most once per second (the throttle is here, on the loop
  side, so a busy child costs no thread hand-off per turn);
* at the end — one write with status, result, stats and worktree outcome, *before* the parent's
  notification is queued.

The parent's acknowledgement of a notification is its own transcript: a resumed session delivers
the notification of every finished background child of that session that its transcript does not
already contain, so nothing is lost and nothing is delivered twice, across restarts included.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from subagents.agents.runner import AgentJob, AgentRun
from subagents.agents.runtime import AgentFrame
from subagents.agents.tasks import TaskState
from subagents.store.files import (
    BatchOp,
    BatchOutcome,
    FileStore,
    OwnedWrite,
    OwnerCommit,
    encode_record,
)
from subagents.store.pipeline import CommitPipeline
from subagents.store.process_identity import ProcessIdentity, current_identity
from subagents.store.protocol import Store
from subagents.store.records import (
    ConfigSnapshot,
    Lineage,
    RunResult,
    RunStats,
    SidecarRecord,
    TokenUsage,
    apply_changes,
)
from subagents.store.records import WorktreeInfo as StoreWorktree
from subagents.store.writer import DurableWriter
from subagents.worktrees.lifecycle import WorktreeInfo

log = logging.getLogger(__name__)

ACTIVITY_INTERVAL_S = 1.0


@dataclass(kw_only=True)
class DurableRecords:
    """The session's side of the store: build records, write them in order, off the loop."""

    store: Store
    writer: DurableWriter
    session_id: str
    project_path: str
    identity: ProcessIdentity = field(default_factory=current_identity)
    _last_touch: dict[str, float] = field(default_factory=dict)
    _pending: list[_Op] = field(default_factory=list)
    _handover: asyncio.Handle | None = None
    _latest: dict[str, SidecarRecord] = field(default_factory=dict)
    """The latest record of each running child this session owns (see ``_change``)."""
    _pipeline: CommitPipeline | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _inflight: set[asyncio.Future[None]] = field(default_factory=set)
    """One future per batch handed over and not yet settled (``drain`` waits for them)."""

    @property
    def _whole_records(self) -> bool:
        """The store takes an owner's whole records (``FileStore.prepare_owned``): changes are
        applied and encoded here, on the loop, so the store has only file work left."""
        return isinstance(self.store, FileStore)

    def _change(self, agent_id: str, **changes: Any) -> asyncio.Future[Any]:
        current = self._latest.get(agent_id)
        if current is None or not self._whole_records:
            return self._submit("update", agent_id, **changes)
        updated = apply_changes(current, changes, now=time.time())
        if updated.is_terminal:
            del self._latest[agent_id]
        else:
            self._latest[agent_id] = updated
        return self._submit("put", updated, encode_record(updated))

    def _submit(self, name: str, *args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        """Queue one store call. Calls made during one event-loop iteration (fifty children
        starting at once) are handed over together, as one group commit; their results come
        back together too."""
        loop = self._loop
        if loop is None or loop.is_closed():
            # Remembered: on Python 3.11 every get_running_loop() costs a getpid() system call.
            loop = self._loop = asyncio.get_running_loop()
        op = _Op(name=name, args=args, kwargs=kwargs, future=loop.create_future())
        self._pending.append(op)
        if self._handover is None:
            self._handover = loop.call_soon(self._hand_over, loop)
        return op.future

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        ops, self._pending, self._handover = self._pending, [], None
        owned = [op for op in ops if op.name == "put"]  # only made when ``_whole_records``
        rest = [op for op in ops if op.name != "put"] if owned else ops
        if owned and isinstance(self.store, FileStore):
            commit = self.store.prepare_owned(list(map(_owned_write, owned)))
            self._commit_owned(loop, commit, owned)
        if rest:
            batch = self._batch_future(loop)
            done = self.writer.submit(_apply, self.store, [op.call for op in rest])
            done.add_done_callback(lambda f: loop.call_soon_threadsafe(_settle, rest, f, batch))

    def _batch_future(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        batch: asyncio.Future[None] = loop.create_future()
        self._inflight.add(batch)
        batch.add_done_callback(self._inflight.discard)
        return batch

    def _commit_owned(
        self, loop: asyncio.AbstractEventLoop, commit: OwnerCommit, ops: list[_Op]
    ) -> None:
        """The owner's records, staged here on the loop: the writer thread only waits for the
        disk (``store.pipeline``) while the renames run back on the loop. Python work and
        system calls on the thread would each hand the GIL back and forth with the busy loop,
        which costs far more than the work itself."""
        batch = self._batch_future(loop)
        if self._pipeline is None or self._pipeline.loop is not loop:
            self._pipeline = CommitPipeline(writer=self.writer, loop=loop)
        self._pipeline.add(commit, lambda done: _settle_owned(done, ops, batch))

    def started(self, job: AgentJob, state: TaskState) -> None:
        record = build_record(
            job,
            state,
            session_id=self.session_id,
            project_path=self.project_path,
            identity=self.identity,
        )
        if self._whole_records:
            self._latest[record.agent_id] = record
            self._submit("put", record, encode_record(record), create=True)
        else:
            self._submit("create", record)
        # The record was just written with lastActiveAt = now: the throttle starts here, so the
        # child's first turns do not pay for an activity write that says nothing new.
        self._last_touch[record.agent_id] = time.monotonic()

    def activity(self, agent_id: str) -> None:
        now = time.monotonic()
        if now - self._last_touch.get(agent_id, 0.0) < ACTIVITY_INTERVAL_S:
            return
        self._last_touch[agent_id] = now
        if agent_id in self._latest and self._whole_records:
            self._change(agent_id, last_active_at=time.time())
        else:
            self._submit("touch_activity", agent_id)

    def backgrounded(self, agent_id: str, output_path: str | None) -> None:
        self._change(agent_id, is_background=True, output_path=output_path)

    def finished(
        self, run: AgentRun, state: TaskState, *, worktree: dict[str, Any] | None = None
    ) -> asyncio.Future[Any]:
        """The terminal write; await it before the notification is queued."""
        self._last_touch.pop(run.agent_id, None)
        changes: dict[str, Any] = {
            "status": state.status,
            "result": RunResult(text=run.result_text, reason=run.reason, error=state.error),
            "stats": run_stats(run),
            "notified": run.is_background,
            "resumable": True,
        }
        if run.worktree_outcome is not None and run.worktree_outcome.get("path"):
            kept = bool(run.worktree_outcome.get("kept"))
            changes["worktree"] = StoreWorktree(
                path=str(run.worktree_outcome["path"]),
                branch=str(run.worktree_outcome.get("branch") or ""),
                outcome="kept" if kept else "removed",
            )
        return self._change(run.agent_id, **changes)

    async def drain(self) -> None:
        """Every write queued so far is done (hand the pending ones over first)."""
        if self._handover is not None:
            self._handover.cancel()
            self._hand_over(asyncio.get_running_loop())
        while self._inflight:
            await asyncio.wait(set(self._inflight))
        await self.writer.drain()


@dataclass(kw_only=True)
class _Op:
    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    future: asyncio.Future[Any]

    @property
    def call(self) -> BatchOp:
        return BatchOp(self.name, self.args, self.kwargs)


def _apply(store: Store, calls: list[BatchOp]) -> list[BatchOutcome]:
    """On the writer thread: one group commit when the store offers it, else call by call."""
    batch = getattr(store, "apply_batch", None)
    if batch is not None:
        outcomes: list[BatchOutcome] = batch(calls)
        return outcomes
    results: list[BatchOutcome] = []
    for call in calls:
        try:
            results.append(BatchOutcome(value=getattr(store, call.name)(*call.args, **call.kwargs)))
        except Exception as exc:
            results.append(BatchOutcome(error=exc))
    return results


def _owned_write(op: _Op) -> OwnedWrite:
    record, data = op.args
    return OwnedWrite(record=record, data=data, create=bool(op.kwargs.get("create")))


def _settle_owned(commit: OwnerCommit, ops: list[_Op], batch: asyncio.Future[None]) -> None:
    outcomes = [
        BatchOutcome(error=error) if error is not None else BatchOutcome(value=op.args[0])
        for op, error in zip(ops, commit.errors, strict=True)
    ]
    _complete(ops, outcomes, batch)


def _settle(
    ops: list[_Op],
    done: concurrent.futures.Future[list[BatchOutcome]],
    batch: asyncio.Future[None],
) -> None:
    """Back on the loop: complete every queued call's future with its own outcome."""
    error = done.exception()
    outcomes = done.result() if error is None else [BatchOutcome(error=error)] * len(ops)
    _complete(ops, outcomes, batch)


def _complete(ops: list[_Op], outcomes: list[BatchOutcome], batch: asyncio.Future[None]) -> None:
    if not batch.done():
        batch.set_result(None)
    for op, outcome in zip(ops, outcomes, strict=True):
        if op.future.done():
            continue
        if outcome.error is not None:
            log.error("durable %s failed: %s", op.name, outcome.error)
            op.future.set_exception(outcome.error)
            op.future.exception()  # retrieved: a failed write is logged, not a loop warning
        else:
            op.future.set_result(outcome.value)


def build_record(
    job: AgentJob,
    state: TaskState,
    *,
    session_id: str,
    project_path: str,
    identity: ProcessIdentity,
) -> SidecarRecord:
    run = job.run
    frame = job.ctx.owner
    definition = frame.definition if isinstance(frame, AgentFrame) else None
    now = time.time()
    return SidecarRecord(
        agent_id=run.agent_id,
        agent_type=run.agent_type,
        description=run.description,
        prompt=run.prompt,
        session_id=session_id,
        project_path=project_path,
        parent_agent_id=run.ref.parent_agent_id,
        is_background=run.is_background,
        tool_use_id=run.tool_use_id,
        lineage=Lineage(
            root_agent_id=run.root_agent_id or run.agent_id,
            resumed_from=run.resumed_from,
            resume_depth=run.resume_depth,
        ),
        config=ConfigSnapshot(
            model=run.model,
            permission_mode=frame.permission_mode if isinstance(frame, AgentFrame) else "default",
            tools=tuple(tool.name for tool in job.tools),
            system_prompt=job.system,
            max_turns=job.budget.max_turns,
            isolation=definition.isolation if definition is not None else None,
            definition_source=definition.source if definition is not None else "runtime",
            definition_path=definition.path if definition is not None else None,
            thinking=job.thinking,
        ),
        created_at=now,
        last_active_at=now,
        process=identity,
        output_path=str(state.output_path) if state.output_path else None,
        transcript_path=str(job.transcript) if job.transcript else None,
        worktree=_worktree_record(job.worktree),
    )


def _worktree_record(info: WorktreeInfo | None) -> StoreWorktree | None:
    if info is None:
        return None
    return StoreWorktree(path=str(info.path), branch=info.branch or "", outcome="active")


def run_stats(run: AgentRun) -> RunStats:
    usage = run.stats.usage
    return RunStats(
        num_turns=run.stats.num_turns,
        total_tool_use_count=run.stats.tool_use_count,
        total_tokens=usage.total,
        usage=TokenUsage(**usage.to_dict()),  # the same four counters, frozen
        total_duration_ms=run.duration_ms,
    )
