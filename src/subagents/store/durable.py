"""``DurableRecords``: a session's writes of its children's records — in order, off the loop.

Per child (SPEC §8-§9) the session writes a ``running`` record when it starts, ``lastActiveAt``
at most once per ``ACTIVITY_INTERVAL_S`` (10 s) while it runs (throttled here, on the loop
side, so a busy child costs no thread hand-off per turn), and one terminal write that the
caller awaits before the parent hears of the child. Writes made during one event-loop
iteration (fifty children starting at once) are handed over together, as one group commit,
and their results come back together.

How a write travels depends on what the store offers (``store.capabilities``):

* ``OwnerWrites``: while a child runs this session is the only writer of its record, so the
  latest record is kept here, each change is applied to it (``records.apply_changes``, the
  store's own rules) and encoded on the loop, and the store only stages it; the disk waits run
  on the ``DurableWriter`` thread (``store.pipeline``) and the publication back on the loop;
* otherwise the ``Store`` calls run on the writer thread, in order — as one ``apply_batch`` when
  the store offers ``BatchWrites``, call by call when it does not.

Either way a failed write is logged and fails its own future only. This is the path production
takes, so ``subagents.testing.store_conformance`` runs it against every store it checks.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import is_
from typing import Any

from subagents.store.capabilities import (
    BatchOp,
    BatchOutcome,
    BatchWrites,
    OwnedWrite,
    OwnerCommit,
    OwnerWrites,
    apply_each,
    encode_record,
)
from subagents.store.pipeline import CommitPipeline
from subagents.store.process_identity import ProcessIdentity, current_identity
from subagents.store.protocol import Store
from subagents.store.record_encoding import RunningTemplate
from subagents.store.records import (
    NO_RESULT,
    NO_STATS,
    SCHEMA_VERSION,
    TERMINAL_STATUSES,
    ConfigSnapshot,
    RunResult,
    RunStats,
    SidecarRecord,
    apply_changes,
    terminal_record,
)
from subagents.store.writer import DurableWriter

log = logging.getLogger(__name__)

ACTIVITY_INTERVAL_S = 10.0
"""At most one ``lastActiveAt`` rewrite per running child per this many seconds. It was 1 s: with
a real model's seconds-long calls that was a whole-record rewrite (encode, temp file, rename, and
the garbage it leaves) on nearly every turn — measured on a swarm of 1,000 children with turns
1.1 s apart, +30-120 µs of CPU per model call (mean +80, five interleaved pairs at load 7-11).
Nothing decides on this field while its owner lives (liveness is the owner's process identity
and the lease; stalls are watched in memory), so staleness in ``tasks show`` is the whole cost."""

SHARED_CONFIGS = 64
"""Distinct config snapshots a session keeps for sharing (a few per definition in practice)."""

Written = asyncio.Future[object]
"""A write's future: its result is what the store returned (the record, for owner writes)."""


@dataclass(kw_only=True)
class _Call:
    """A batch operation waiting in the batch, with its caller's future."""

    op: BatchOp
    future: Written


@dataclass(kw_only=True)
class DurableRecords:
    """The session's side of the store: its children's records, written in order, off the loop.

    ``session_id`` and ``project_path`` are the session's access key (``records.is_visible``),
    ``identity`` the owner identity its records carry."""

    store: Store
    writer: DurableWriter
    session_id: str
    project_path: str
    identity: ProcessIdentity = field(default_factory=current_identity)
    _owner: OwnerWrites | None = field(default=None, init=False)
    """The store, when it takes whole records from their owner (decided once)."""
    _last_touch: dict[str, float] = field(default_factory=dict)
    _owned: list[OwnedWrite] = field(default_factory=list)
    """Owned writes waiting in the batch; ``_owned_futures`` holds their callers' futures, one
    per write (two lists, not a pair object per write)."""
    _owned_futures: list[Written] = field(default_factory=list)
    _calls: list[_Call] = field(default_factory=list)
    _handover: asyncio.Handle | None = None
    _latest: dict[str, SidecarRecord] = field(default_factory=dict)
    """The latest record of each running child this session owns (see ``change``)."""
    _pipeline: CommitPipeline | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _inflight: set[asyncio.Future[None]] = field(default_factory=set)
    """One future per batch handed over and not yet settled (``drain`` waits for them)."""
    _configs: dict[ConfigSnapshot, ConfigSnapshot] = field(default_factory=dict)
    """Config snapshots seen (``shared_config``), at most ``SHARED_CONFIGS``."""
    _built_configs: dict[tuple[int, ...], tuple[tuple[object, ...], ConfigSnapshot]] = field(
        default_factory=dict
    )
    """``config_from``'s snapshots by the ids of what they were built from (which each entry
    keeps, so an id is never reused while its entry lives), at most ``SHARED_CONFIGS``."""
    _templates: dict[tuple[object, ...], RunningTemplate] = field(default_factory=dict)
    """``running_template``'s templates (each keeps its config: an id is never reused while its
    entry lives), at most ``SHARED_CONFIGS``."""
    _last_shape: tuple[tuple[object, ...], ConfigSnapshot, RunningTemplate | None] | None = None
    """``start_shape``'s last answer: the parts it was for (with the type, parent and placement
    at their end), the config snapshot and the template."""
    _started_from: dict[str, RunningTemplate] = field(default_factory=dict)
    """The template each running child's record was made from (``start_from``), for its
    terminal write's bytes (``terminal``); dropped when the record is terminal."""

    def __post_init__(self) -> None:
        if isinstance(self.store, OwnerWrites):
            self._owner = self.store

    # -- what the session writes --------------------------------------------------------------

    def started(self, record: SidecarRecord, data: bytes | None = None) -> Written:
        """A child's first record (``running``, with its owner identity and frozen config);
        ``data``: its bytes when the caller has them (``RunningTemplate.encode``), else they
        are ``encode_record``'s."""
        if self._owner is not None:
            self._latest[record.agent_id] = record
            if data is None:
                data = encode_record(record)
            future = self._own(_owned_write(record, data, True))
        else:
            future = self._call(BatchOp("create", (record,)))
        # The record was just written with lastActiveAt = now: the throttle starts here, so the
        # child's first turns do not pay for an activity write that says nothing new.
        self._last_touch[record.agent_id] = time.monotonic()
        return future

    def start_from(self, template: RunningTemplate, values: dict[str, Any]) -> Written:
        """``started`` of the record ``template`` makes from ``values`` (a copy of
        ``template.values`` with the child's own fields set), its bytes the template's; the
        template is kept for the child's terminal write (``terminal``)."""
        record = template.record(values)
        future = self.started(record, template.encode(values))
        if self._owner is not None:
            self._started_from[record.agent_id] = template
        return future

    def start_shape(
        self,
        parts: tuple[object, ...],
        build: Callable[[], ConfigSnapshot],
        agent_type: str,
        parent_agent_id: str | None,
        is_background: bool,
    ) -> tuple[ConfigSnapshot, RunningTemplate | None]:
        """``config_from(parts, build)`` and the ``running_template`` of that config for the
        type, parent and placement: the last answer again when every one of them is the very
        object it was for (siblings launched one after another), without the look-ups of both
        (the ids of the parts mapped, two keys hashed)."""
        key = (*parts, agent_type, parent_agent_id, is_background)
        last = self._last_shape
        if last is not None and len(last[0]) == len(key) and all(map(is_, last[0], key)):
            return last[1], last[2]
        config = self.config_from(parts, build)
        template = self.running_template(agent_type, parent_agent_id, is_background, config)
        self._last_shape = (key, config, template)
        return config, template

    def shared_config(self, config: ConfigSnapshot) -> ConfigSnapshot:
        """One object for equal config snapshots: the children of one definition have the same
        one (frozen), and each running child's record holds it while the child waits."""
        try:
            shared = self._configs.get(config)
            if shared is None and len(self._configs) < SHARED_CONFIGS:
                shared = self._configs[config] = config
        except TypeError:  # an unhashable field (a ``thinking`` dict): not shared
            return config
        return config if shared is None else shared

    def config_from(
        self, parts: tuple[object, ...], build: Callable[[], ConfigSnapshot]
    ) -> ConfigSnapshot:
        """``shared_config(build())``, built once per ``parts`` — the very objects (not equal
        ones) the snapshot is made of, none of them changed in place: a thousand children of
        one type would otherwise build, hash and compare a thousand equal snapshots (~40 k
        instructions each)."""
        key = tuple(map(id, parts))
        hit = self._built_configs.get(key)
        if hit is not None and hit[0] == parts:  # the same objects: ``==`` is identity here
            return hit[1]
        config = self.shared_config(build())
        if len(self._built_configs) >= SHARED_CONFIGS:
            self._built_configs.clear()  # one-off snapshots (a memory prompt each) cycle out
        self._built_configs[key] = (parts, config)
        return config

    def running_template(
        self,
        agent_type: str,
        parent_agent_id: str | None,
        is_background: bool,
        config: ConfigSnapshot,
    ) -> RunningTemplate | None:
        """The template of a fresh child's running record in this session (its owner identity,
        the shared empty result and stats), one per type, parent and placement and config
        snapshot (the very object: ``config_from``'s, shared by siblings); None where the
        record is not encoded here (the store takes records, not bytes) or a shared part is not
        ``orjson``'s to encode."""
        if self._owner is None or type(config) is not ConfigSnapshot:
            return None
        if type(is_background) is not bool:  # 1 == True (one key) but encodes as 1: no template
            return None  # type: ignore[unreachable]
        key = (agent_type, parent_agent_id, is_background, id(config))
        hit = self._templates.get(key)
        if hit is not None and hit.values["config"] is config:  # the entry keeps it: same id
            return hit
        shared = {
            "schema_version": SCHEMA_VERSION,
            "agent_type": agent_type,
            "session_id": self.session_id,
            "project_path": self.project_path,
            "parent_agent_id": parent_agent_id,
            "is_background": is_background,
            "config": config,
            "process": self.identity,
            "worktree": None,
            "status": "running",
            "ended_at": None,
            "result": NO_RESULT,
            "stats": NO_STATS,
            "notified": False,
            "stop_requested": False,
            "restart_recovery": None,
            "resumable": False,
        }
        try:
            template = RunningTemplate(shared)
        except TypeError:
            return None
        if len(self._templates) >= SHARED_CONFIGS:
            self._templates.clear()  # one-off configs (a memory prompt each) cycle out
        self._templates[key] = template
        return template

    def activity(self, agent_id: str) -> None:
        """The child made progress: ``lastActiveAt``, at most once per ``ACTIVITY_INTERVAL_S``."""
        now = time.monotonic()
        if now - self._last_touch.get(agent_id, 0.0) < ACTIVITY_INTERVAL_S:
            return
        self._last_touch[agent_id] = now
        if agent_id in self._latest:
            self.change(agent_id, last_active_at=time.time())
        else:
            self._call(BatchOp("touch_activity", (agent_id,)))

    def change(self, agent_id: str, **changes: Any) -> Written:
        """Change fields of a child's record (by ``SidecarRecord`` field name)."""
        return self._change(agent_id, changes)

    def _change(self, agent_id: str, changes: dict[str, Any]) -> Written:
        """``change`` with the changes as the dict its keywords made (``finished`` hands its own
        on: each ``**`` pass would pack a new one)."""
        current = self._latest.get(agent_id)
        if current is None:
            return self._call(BatchOp("update", (agent_id,), changes))
        # No ``to_dict`` of the whole record: it is encoded from its fields (``record_encoding``).
        updated = apply_changes(current, changes, now=time.time())
        if updated.is_terminal:
            del self._latest[agent_id]
            self._started_from.pop(agent_id, None)
        else:
            self._latest[agent_id] = updated
        return self._own(_owned_write(updated, encode_record(updated), False))

    def finished(self, agent_id: str, **changes: Any) -> Written:
        """The terminal write (``changes`` include a terminal ``status``); await it before the
        parent is told."""
        self._last_touch.pop(agent_id, None)
        return self._change(agent_id, changes)

    def terminal(
        self,
        agent_id: str,
        status: str,
        result: RunResult,
        stats: RunStats,
        notified: bool,
        resumable: bool,
    ) -> Written:
        """``finished(agent_id, status=status, result=result, stats=stats, notified=notified,
        resumable=resumable)`` — a child's terminal write — without a changes dict on the
        owner's path: the record by ``records.terminal_record``, its bytes from the template
        the child started from when it did (``RunningTemplate.encode_terminal``). The same
        record and bytes (``tests/test_terminal_record.py``)."""
        self._last_touch.pop(agent_id, None)
        template = self._started_from.pop(agent_id, None)
        current = self._latest.get(agent_id)
        if current is None:
            changes = {
                "status": status,
                "result": result,
                "stats": stats,
                "notified": notified,
                "resumable": resumable,
            }
            return self._call(BatchOp("update", (agent_id,), changes))
        updated = terminal_record(current, status, result, stats, notified, resumable, time.time())
        if updated.status in TERMINAL_STATUSES:  # (``is_terminal`` without its call)
            del self._latest[agent_id]
        else:
            self._latest[agent_id] = updated
            if template is not None:
                self._started_from[agent_id] = template
        data = None if template is None else template.encode_terminal(updated)
        data = encode_record(updated) if data is None else data
        return self._own(_owned_write(updated, data, False))

    async def drain(self) -> None:
        """Every write queued so far is done (hand the pending ones over first)."""
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop and self._loop.is_closed():
            self._left_loop(loop)
        if self._handover is not None:
            self._handover.cancel()
            self._hand_over(loop)
        while self._inflight:
            await asyncio.wait(set(self._inflight))
        await self.writer.drain()

    def close(self) -> None:
        """Release the commit pipeline's wake-up descriptor (after ``drain``, on the loop)."""
        if self._pipeline is not None:
            self._pipeline.close()

    # -- queueing and handing over ------------------------------------------------------------

    def _own(self, write: OwnedWrite) -> Written:
        # ``_future`` in line (two owner writes per child: a Python call each less)
        loop = self._loop
        if loop is None or loop.is_closed():
            loop = self._loop = self._left_loop(asyncio.get_running_loop())
        if self._handover is None:
            self._handover = loop.call_soon(self._hand_over, loop)
        future: Written = loop.create_future()
        self._owned.append(write)
        self._owned_futures.append(future)
        return future

    def _call(self, op: BatchOp) -> Written:
        item = _Call(op=op, future=self._future())
        self._calls.append(item)
        return item.future

    def _future(self) -> Written:
        loop = self._loop
        if loop is None or loop.is_closed():
            # Remembered: on Python 3.11 every get_running_loop() costs a getpid() system call.
            loop = self._loop = self._left_loop(asyncio.get_running_loop())
        if self._handover is None:
            self._handover = loop.call_soon(self._hand_over, loop)
        future: Written = loop.create_future()
        return future

    def _left_loop(self, loop: asyncio.AbstractEventLoop) -> asyncio.AbstractEventLoop:
        """This session writes on ``loop`` now; the loop it wrote on before (if any) has closed.
        Nothing a closed loop holds may keep a write back: its hand-over callback will never
        run (so the writes queued for it go with ``loop``'s), the commit pipeline's rounds
        are carried on to ``loop`` (``CommitPipeline.move_to``), and its batch futures, which
        nothing can settle any more, stop counting for ``drain`` (whose wait for the writer
        covers the rounds ``move_to`` submits)."""
        self._handover = None
        if self._pipeline is not None and self._pipeline.loop.is_closed():
            self._pipeline.move_to(loop)
        self._inflight = {f for f in self._inflight if not f.get_loop().is_closed()}
        return loop

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        owned, futures, calls = self._owned, self._owned_futures, self._calls
        self._owned, self._owned_futures, self._calls, self._handover = [], [], [], None
        if owned and self._owner is not None:
            commit = self._owner.prepare_owned(owned)
            self._commit_owned(loop, commit, owned, futures)
        if calls:
            batch = self._batch_future(loop)
            done = self.writer.submit(_apply, self.store, [item.op for item in calls])
            done.add_done_callback(lambda f: loop.call_soon_threadsafe(_settle, calls, f, batch))

    def _batch_future(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        batch: asyncio.Future[None] = loop.create_future()
        self._inflight.add(batch)
        batch.add_done_callback(self._inflight.discard)
        return batch

    def _commit_owned(
        self,
        loop: asyncio.AbstractEventLoop,
        commit: OwnerCommit,
        writes: list[OwnedWrite],
        futures: list[Written],
    ) -> None:
        """The owner's records, staged here on the loop: the writer thread only waits for the
        disk (``store.pipeline``) while the publication runs back on the loop. Python work and
        system calls on the thread would each hand the GIL back and forth with the busy loop,
        which costs far more than the work itself."""
        batch = self._batch_future(loop)
        if self._pipeline is None or self._pipeline.loop is not loop:
            if self._pipeline is not None:
                self._pipeline.close()  # of a loop this session has left (its descriptor)
            self._pipeline = CommitPipeline(writer=self.writer, loop=loop)
        self._pipeline.add(commit, lambda done: _settle_owned(done, writes, futures, batch))


_new = object.__new__
_set = object.__setattr__


def _owned_write(record: SidecarRecord, data: bytes, create: bool) -> OwnedWrite:
    """``OwnedWrite(record, data, create)`` without the frozen ``__init__``'s three
    ``object.__setattr__`` calls: its dict set at once, as ``frozen.new_frozen`` does (6.0 k →
    3.6 k instructions, two per child). ``tests/test_owned_write.py`` compares the two."""
    write: OwnedWrite = _new(OwnedWrite)
    _set(write, "__dict__", {"record": record, "data": data, "create": create})
    return write


def _apply(store: Store, ops: list[BatchOp]) -> list[BatchOutcome]:
    """On the writer thread: one group commit when the store offers it, else call by call."""
    if isinstance(store, BatchWrites):
        return store.apply_batch(ops)
    return apply_each(store, ops)


def _settle_owned(
    commit: OwnerCommit,
    writes: list[OwnedWrite],
    futures: list[Written],
    batch: asyncio.Future[None],
) -> None:
    """Back on the loop: each owned write's future gets its record, or its own error (as
    ``_complete``, without an outcome object per write). A future of a loop that has closed
    (a commit carried on from it: ``CommitPipeline.move_to``) takes its result but cannot
    schedule its callbacks: nothing on that loop runs any more."""
    try:
        if not batch.done():
            batch.set_result(None)
    except RuntimeError:  # its loop closed
        pass
    for write, future, error in zip(writes, futures, commit.errors, strict=True):
        if future.done():
            continue
        try:
            if error is not None:
                _fail(future, "record write", error)
            else:
                future.set_result(write.record)
        except RuntimeError:  # its loop closed
            pass


def _settle(
    items: list[_Call],
    done: concurrent.futures.Future[list[BatchOutcome]],
    batch: asyncio.Future[None],
) -> None:
    """Back on the loop: complete every queued call's future with its own outcome."""
    error = done.exception()
    outcomes = done.result() if error is None else [BatchOutcome(error=error)] * len(items)
    _complete(items, outcomes, batch)


def _complete(
    items: Sequence[_Call], outcomes: list[BatchOutcome], batch: asyncio.Future[None]
) -> None:
    if not batch.done():
        batch.set_result(None)
    for item, outcome in zip(items, outcomes, strict=True):
        future = item.future
        if future.done():
            continue
        if outcome.error is not None:
            _fail(future, item.op.name, outcome.error)
        else:
            future.set_result(outcome.value)


def _fail(future: Written, what: str, error: BaseException) -> None:
    log.error("durable %s failed: %s", what, error)
    future.set_exception(error)
    future.exception()  # retrieved: a failed write is logged, not a loop warning
