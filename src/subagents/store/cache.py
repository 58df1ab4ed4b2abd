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

from subagents.store.records import SidecarRecord

DEFAULT_CAPACITY = 256

Signature = tuple[int, int, int]
"""``(inode, mtime_ns, size)``: an atomic replace always changes the inode."""


_Entry = tuple[SidecarRecord, Signature]
"""A cached sidecar record and the file signature it was read at: a pair, not a frozen
dataclass (one is made at every write of every record: ~4 k instructions less each)."""


class RecordCache:
    """Sidecars by agent id; ``len(terminal) <= capacity`` always, running entries unbounded.

    Terminal and running entries live in separate maps, so eviction takes the least recently
    used terminal entry in O(1) instead of scanning past the running ones."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._terminal: OrderedDict[str, _Entry] = OrderedDict()  # least recently used first
        self._running: dict[str, _Entry] = {}

    def get(self, agent_id: str, signature: Signature) -> SidecarRecord | None:
        """The cached record if its file still has ``signature``; marks it recently used."""
        entry = self._running.get(agent_id)
        if entry is None:
            entry = self._terminal.get(agent_id)
            if entry is None or entry[1] != signature:
                return None
            self._terminal.move_to_end(agent_id)
        elif entry[1] != signature:
            return None
        return entry[0]

    def put(
        self, record: SidecarRecord, signature: Signature, terminal: bool | None = None
    ) -> None:
        """Cache ``record`` read or written at ``signature``; ``terminal``: whether it is (its
        ``is_terminal``, when the caller has it at hand: a writer asks it once per write)."""
        agent_id = record.agent_id
        if self._running.pop(agent_id, None) is None:  # (``discard``, without its call)
            self._terminal.pop(agent_id, None)
        entry = (record, signature)
        if not (record.is_terminal if terminal is None else terminal):
            self._running[agent_id] = entry
            return
        self._terminal[agent_id] = entry
        while len(self._terminal) > self.capacity:
            self._terminal.popitem(last=False)

    def discard(self, agent_id: str) -> None:
        if self._running.pop(agent_id, None) is None:
            self._terminal.pop(agent_id, None)

    @property
    def terminal_count(self) -> int:
        return len(self._terminal)

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._running or agent_id in self._terminal

    def __len__(self) -> int:
        return len(self._running) + len(self._terminal)
