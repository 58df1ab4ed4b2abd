"""A process-local cache of sidecars: terminal ones bounded (LRU), running ones pinned.

A long-lived process (a server, a session with hundreds of fan-out children) reads finished
runs' sidecars again and again (TaskOutput, listings, resume checks), so keeping them saves file
reads; but finished runs accumulate without end, so at most ``capacity`` terminal records stay.
Running records are never evicted: they are few (one per live child), and they are the ones the
manager reads every second. Each entry carries the file's stat signature, so a copy changed by
another process is noticed and re-read rather than served stale.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from subagents.store.records import SidecarRecord

DEFAULT_CAPACITY = 256

Signature = tuple[int, int, int]
"""``(inode, mtime_ns, size)``: an atomic replace always changes the inode."""


@dataclass(kw_only=True, frozen=True)
class _Entry:
    record: SidecarRecord
    signature: Signature


class RecordCache:
    """Sidecars by agent id; ``len(terminal) <= capacity`` always, running entries unbounded."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._terminal = 0

    def get(self, agent_id: str, signature: Signature) -> SidecarRecord | None:
        """The cached record if its file still has ``signature``; marks it recently used."""
        entry = self._entries.get(agent_id)
        if entry is None or entry.signature != signature:
            return None
        self._entries.move_to_end(agent_id)
        return entry.record

    def put(self, record: SidecarRecord, signature: Signature) -> None:
        self.discard(record.agent_id)
        self._entries[record.agent_id] = _Entry(record=record, signature=signature)
        if record.is_terminal:
            self._terminal += 1
            self._evict()

    def discard(self, agent_id: str) -> None:
        entry = self._entries.pop(agent_id, None)
        if entry is not None and entry.record.is_terminal:
            self._terminal -= 1

    def _evict(self) -> None:
        """Drop least recently used terminal entries until within capacity; skip running ones."""
        if self._terminal <= self.capacity:
            return
        for agent_id in [k for k, e in self._entries.items() if e.record.is_terminal]:
            self.discard(agent_id)
            if self._terminal <= self.capacity:
                return

    @property
    def terminal_count(self) -> int:
        return self._terminal

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._entries

    def __len__(self) -> int:
        return len(self._entries)
