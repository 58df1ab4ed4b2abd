"""``Store``: where child runs' sidecar records live, as a Protocol of a few methods.

The background manager, TaskOutput/TaskStop, resume and orphan reconciliation only talk to this
protocol, so the on-disk ``FileStore`` can later be joined by a database-backed store for runs
spread over several machines. Every implementation must pass
``subagents.testing.store_conformance``; ``MemoryStore`` is the reference.

Rules every store shares (``records.apply_changes`` implements them once):

- ids are never reused: ``create`` refuses an existing id;
- identity fields (id, session, project, creation time) never change after ``create``;
- a terminal status (completed, failed, killed) is final: an update to another status raises
  ``TerminalStatusError``. The store enforces it, because the writes that would break it (a late
  activity update racing TaskStop, a recovery racing the owner) come from different callers;
- an update is all-or-nothing: an invalid change leaves the stored record untouched, and
  readers never see a half-written record.

The methods are synchronous: sidecar writes are rare (create, at most one activity write per
second, the terminal write), and an async caller that cannot afford an ``fsync`` on its event
loop wraps the call in ``asyncio.to_thread``.

Visibility: ``list_agents`` only returns records of the given project path (and session, when
given); callers pass canonical paths, and stores compare them exactly. ``get`` and the other
by-id methods do not check access: a caller acting for a session checks
``records.is_visible`` (same parent session and same project) before using a record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from subagents.store.process_identity import ProcessIdentity
from subagents.store.records import SidecarRecord


@runtime_checkable
class Store(Protocol):
    """Durable sidecar records plus per-run leases; see the module docstring for the rules."""

    def create(self, record: SidecarRecord) -> None:
        """Store a new record durably. Raises ``DuplicateAgentError`` if the id exists."""
        ...

    def get(self, agent_id: str) -> SidecarRecord | None:
        """The latest durable version of the record, or None if there is none."""
        ...

    def update(self, agent_id: str, **changes: Any) -> SidecarRecord:
        """Replace fields (by ``SidecarRecord`` field name) atomically; returns the new record.

        Raises ``UnknownAgentError`` for an unknown id, ``TerminalStatusError`` when the change
        would move a terminal record to another status, ``InvalidRecordError`` for an unknown
        field, a changed identity field or a value of the wrong type. Entering a terminal status
        stamps ``ended_at`` and flushes any coalesced activity time.
        """
        ...

    def list_agents(
        self, project_path: str | Path, *, session_id: str | None = None
    ) -> list[SidecarRecord]:
        """Records of exactly this project (and session, if given), oldest first."""
        ...

    def touch_activity(self, agent_id: str) -> None:
        """Note that the run made progress now. Stores may coalesce these to one write per
        second per run; a coalesced time is written by the next update. No-op on a terminal
        record. Raises ``UnknownAgentError`` for an unknown id."""
        ...

    def request_stop(self, agent_id: str) -> SidecarRecord:
        """Set ``stop_requested`` (idempotent; kept as is on a terminal record) and return the
        record, so an owner in another process sees TaskStop. Unknown id: ``UnknownAgentError``."""
        ...

    def take_lease(self, agent_id: str, owner: ProcessIdentity) -> bool:
        """Become the one process allowed to run or recover ``agent_id``.

        True if ``owner`` now holds the lease (also when it already did); False while another
        owner holds it and is alive. A holder found dead (``process_identity.is_alive``, so a
        reused PID does not count) is replaced. Leases do not require the record to exist.
        """
        ...

    def release_lease(self, agent_id: str, owner: ProcessIdentity) -> None:
        """Give the lease up if ``owner`` holds it; never removes another owner's lease."""
        ...
