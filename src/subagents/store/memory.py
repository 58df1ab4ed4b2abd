"""``MemoryStore``: the reference ``Store``, in one process's memory.

It states the contract in the fewest lines, is what the conformance suite is first checked
against, and serves tests and runs that need no durability (``--no-session-persistence``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from subagents.store.errors import DuplicateAgentError, UnknownAgentError
from subagents.store.process_identity import ProcessIdentity, is_alive
from subagents.store.records import SidecarRecord, apply_changes


class MemoryStore:
    """Records and leases in dictionaries, guarded by one lock (threads may share a store)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        alive: Callable[[ProcessIdentity], bool] = is_alive,
    ) -> None:
        self._clock = clock
        self._alive = alive
        self._records: dict[str, SidecarRecord] = {}
        self._leases: dict[str, ProcessIdentity] = {}
        self._lock = threading.Lock()

    def create(self, record: SidecarRecord) -> None:
        with self._lock:
            if record.agent_id in self._records:
                raise DuplicateAgentError(f"agent {record.agent_id} already has a record")
            self._records[record.agent_id] = record

    def get(self, agent_id: str) -> SidecarRecord | None:
        with self._lock:
            return self._records.get(agent_id)

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
                r
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
                record = apply_changes(record, {"stop_requested": True}, now=self._clock())
                self._records[agent_id] = record
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

    def _require(self, agent_id: str) -> SidecarRecord:
        record = self._records.get(agent_id)
        if record is None:
            raise UnknownAgentError(f"no record for agent {agent_id}")
        return record
