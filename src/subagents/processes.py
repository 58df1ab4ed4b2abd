"""Tracking of the OS processes an agent started, so none outlives its owner.

Every shell a tool starts runs in its own process group (``start_new_session=True``), so one
``killpg`` reaches the shell and everything it spawned. A process is tracked from spawn until it
has been reaped; while it is unreaped its PID cannot be reused, so killing a tracked group never
hits a stranger.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable


class ProcessTracker:
    """The live process groups of one agent (or of the whole session, at the root)."""

    __slots__ = ("_groups", "on_add")

    def __init__(self, on_add: Callable[[int], None] | None = None) -> None:
        self._groups: set[int] = set()
        self.on_add = on_add
        """Called with each new group (a child records it on disk for crash recovery)."""

    def add(self, pgid: int) -> None:
        self._groups.add(pgid)
        if self.on_add is not None:
            self.on_add(pgid)

    def discard(self, pgid: int) -> None:
        self._groups.discard(pgid)

    @property
    def groups(self) -> frozenset[int]:
        return frozenset(self._groups)

    def kill_all(self, sig: int = signal.SIGKILL) -> list[int]:
        """Signal every tracked group; returns the groups signalled. Safe to call twice."""
        killed: list[int] = []
        for pgid in list(self._groups):
            if kill_group(pgid, sig):
                killed.append(pgid)
        return killed


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` to a process group; False when it is already gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True
