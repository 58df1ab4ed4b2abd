"""``MemoryStore``: the reference ``Store``, in one process's memory.

It states the contract in the fewest lines, is what the conformance suite is first checked
against, and serves tests and runs that need no durability (``--no-session-persistence``). It
offers every capability of ``store.capabilities`` the way ``FileStore`` does — owner writes,
batches, the stop-request listing, the running index — so the session's write path runs on it
unchanged. It defines those in terms of its ``Store`` methods, so the rules stay in one place:
an owner write is a ``create``, or an ``update`` of the fields that changed; a batch is its ops
called one by one. A stop request is kept apart from the record (as ``FileStore`` keeps it in a
file of its own), so the owner's next whole-record write cannot erase it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from subagents.store.capabilities import (
    BatchOp,
    BatchOutcome,
    OwnedWrite,
    apply_each,
)
from subagents.store.errors import DuplicateAgentError, UnknownAgentError
from subagents.store.process_identity import ProcessIdentity, is_alive
from subagents.store.records import SidecarRecord, apply_changes


class MemoryStore:
    """Records and leases in dictionaries, guarded by one lock (threads may share a store)."""

    batchable_ops: frozenset[str] = frozenset()
    """A batch gains nothing in memory: the writer runs queued calls one by one."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        alive: Callable[[ProcessIdentity], bool] = is_alive,
    ) -> None:
        self._clock = clock
        self._alive = alive
        self._records: dict[str, SidecarRecord] = {}
        self._stops: set[str] = set()
        self._leases: dict[str, ProcessIdentity] = {}
        self._lock = threading.Lock()

    def create(self, record: SidecarRecord) -> None:
        with self._lock:
            if record.agent_id in self._records:
                raise DuplicateAgentError(f"agent {record.agent_id} already has a record")
            self._records[record.agent_id] = record

    def get(self, agent_id: str) -> SidecarRecord | None:
        with self._lock:
            record = self._records.get(agent_id)
            return None if record is None else self._visible(record)

    def update(self, agent_id: str, **changes: Any) -> SidecarRecord:
        with self._lock:
            updated = apply_changes(self._require(agent_id), changes, now=self._clock())
            self._records[agent_id] = updated
            return updated

    def list_agents(
        self, project_path: str | Path, *, session_id: str | None = None
    ) -> list[SidecarRecord]:
        project = str(project_path)
        with self._lock:
            found = [
                self._visible(r)
                for r in self._records.values()
                if r.project_path == project and session_id in (None, r.session_id)
            ]
        return sorted(found, key=lambda r: r.created_at)

    def touch_activity(self, agent_id: str) -> None:
        with self._lock:
            record = self._require(agent_id)
            if not record.is_terminal:
                now = self._clock()
                self._records[agent_id] = apply_changes(record, {"last_active_at": now}, now=now)

    def request_stop(self, agent_id: str) -> SidecarRecord:
        with self._lock:
            record = self._require(agent_id)
            if not record.stop_requested and not record.is_terminal:
                self._stops.add(agent_id)
                record = replace(record, stop_requested=True)
            return record

    def take_lease(self, agent_id: str, owner: ProcessIdentity) -> bool:
        with self._lock:
            holder = self._leases.get(agent_id)
            if holder is not None and holder != owner and self._alive(holder):
                return False
            self._leases[agent_id] = owner
            return True

    def release_lease(self, agent_id: str, owner: ProcessIdentity) -> None:
        with self._lock:
            if self._leases.get(agent_id) == owner:
                del self._leases[agent_id]

    # -- capabilities (``store.capabilities``) ----------------------------------------------

    def apply_batch(self, ops: Sequence[BatchOp]) -> list[BatchOutcome]:
        return apply_each(self, ops)

    def prepare_owned(self, writes: Sequence[OwnedWrite]) -> MemoryCommit:
        commit = MemoryCommit(writes=list(writes), on_published=self._publish)
        with self._lock:
            for write in commit.writes:
                exists = write.record.agent_id in self._records
                duplicate = write.create and exists
                commit.errors.append(
                    DuplicateAgentError(f"agent {write.record.agent_id} already has a record")
                    if duplicate
                    else None
                )
        return commit

    def stop_requested_ids(self, project_path: str | Path) -> set[str]:
        project = str(project_path)
        with self._lock:
            return {
                agent_id
                for agent_id in self._stops
                if (r := self._records.get(agent_id)) is not None and r.project_path == project
            }

    def list_running(self, project_path: str | Path) -> list[SidecarRecord]:
        return [r for r in self.list_agents(project_path) if r.status == "running"]

    # -- internals ----------------------------------------------------------------------------

    def _publish(self, write: OwnedWrite) -> None:
        """An owner write, as the ``Store`` call it amounts to."""
        record = write.record
        if write.create:
            self.create(record)
            return
        with self._lock:
            current = self._records.get(record.agent_id)
        if current is None:
            raise UnknownAgentError(f"no record for agent {record.agent_id}")
        before = vars(current)
        changes = {k: v for k, v in vars(record).items() if k not in before or before[k] != v}
        self.update(record.agent_id, **changes)

    def _visible(self, record: SidecarRecord) -> SidecarRecord:
        """A running record shows a stop request made through ``request_stop``."""
        if record.agent_id in self._stops and not record.stop_requested and not record.is_terminal:
            return replace(record, stop_requested=True)
        return record

    def _require(self, agent_id: str) -> SidecarRecord:
        record = self._records.get(agent_id)
        if record is None:
            raise UnknownAgentError(f"no record for agent {agent_id}")
        return self._visible(record)


@dataclass(kw_only=True)
class MemoryCommit:
    """Owner writes to a ``MemoryStore``: nothing to wait for, visible once published."""

    writes: list[OwnedWrite]
    on_published: Callable[[OwnedWrite], None]
    """Makes one write visible (raises what refuses it)."""
    errors: list[BaseException | None] = field(default_factory=list)
    needs_sync: bool = False
    _published: bool = False

    def sync(self) -> None:
        pass

    def publish(self, *, failed: BaseException | None = None) -> None:
        if self._published:
            return
        self._published = True
        if failed is not None:
            self.fail(failed)
        for index, write in enumerate(self.writes):
            if self.errors[index] is None:
                try:
                    self.on_published(write)
                except Exception as exc:
                    self.errors[index] = exc

    def sync_renamed(self) -> None:
        pass

    def fail(self, error: BaseException) -> None:
        self.errors[:] = [e or error for e in self.errors]
