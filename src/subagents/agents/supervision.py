"""``Supervisor``: the watch kept on background children — progress lines and stall timeouts.

A background child nobody waits for is watched: a check every ``check_s`` compares its activity
(turns, tool uses, tokens) with the last check's; a change appends a ``[progress]`` line to its
output file, and no change for ``stall_s`` aborts it (``Child.stall``: it ends failed with its
partial result). When its task ends, ``on_done`` runs (the children's manager finalizes it).

A done-callback per child and one sweep timer for all of them rather than a supervising task or
a timer each: with 1,000 children a task each (its coroutine, futures and per-wait sets) cost
CPU per check and gave the garbage collector twice the live objects to scan, and a timer each
cost a heap push and a cancellation per child (the loop's timer heap holds every model call's
wait too). The sweep visits each watched child once per ``check_s``, so a child's first check
comes within ``check_s`` of its start and a stall is seen at most ``check_s`` after
``stall_s``, as with a timer each. The supervisor keeps no reference to the manager
(``on_done`` rides on the child's own task) and drops its timer when nothing is watched, so no
reference cycle outlives a child.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

from subagents.agents.child_state import Child

CHECK_MIN_S, CHECK_MAX_S = 0.05, 5.0


class Supervisor:
    """Watches the background children of one session."""

    def __init__(self, stall_timeout_ms: int) -> None:
        self.stall_s = stall_timeout_ms / 1000
        self.check_s = max(CHECK_MIN_S, min(CHECK_MAX_S, self.stall_s / 4))
        self._watched: dict[str, Child] = {}
        self._sweep: asyncio.TimerHandle | None = None

    @property
    def watched(self) -> int:
        """Children watched and not yet forgotten (``expecting_notifications`` asks it at every
        wake-up of a waiting inbox: a scan of 1,000 children each time would add up)."""
        return len(self._watched)

    def watch(self, child: Child, on_done: Callable[[Child], None]) -> None:
        """Start watching ``child``; ``on_done(child)`` runs as soon as its task is done."""
        self._watched[child.agent_id] = child
        if self._sweep is None:
            self._arm(child.task.get_loop())
        child.task.add_done_callback(_Ended(child, on_done))

    def forget(self, child: Child) -> None:
        """``child`` has ended: no more checks (and no timer once nothing is watched)."""
        self._watched.pop(child.agent_id, None)
        if not self._watched and self._sweep is not None:
            self._sweep.cancel()  # a cancelled handle drops its callback: no cycle left
            self._sweep = None

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        self._sweep = loop.call_later(self.check_s, self._sweep_all, loop)

    def _sweep_all(self, loop: asyncio.AbstractEventLoop) -> None:
        """One check of every watched child, then the next sweep (while any is watched)."""
        self._sweep = None
        now = time.monotonic()
        for child in list(self._watched.values()):
            if not (child.task.done() or child.finalized):
                self._check(child, now)
        if self._watched:
            self._arm(loop)

    def _check(self, child: Child, now: float) -> None:
        stats = child.run.stats
        activity = (stats.num_turns, stats.tool_use_count, stats.usage.total)
        if activity != child.activity:
            child.activity, child.last_progress = activity, now
            _write_progress(child)
            return
        stalled = self.stall_s > 0 and now - child.last_progress >= self.stall_s
        if stalled and child.stalled_ms is None:
            child.stall(int((now - child.last_progress) * 1000))


class _Ended:
    """The child's done-callback: ``on_done(child)``. Slots, not a closure (one tracked object
    per child instead of a function, its cell tuple and two cells)."""

    __slots__ = ("child", "on_done")

    def __init__(self, child: Child, on_done: Callable[[Child], None]) -> None:
        self.child, self.on_done = child, on_done

    def __call__(self, _: object) -> None:
        self.on_done(self.child)


def _write_progress(child: Child) -> None:
    path = child.state.output_file
    if path is None:
        return
    stats = child.run.stats
    line = (
        f"[progress] turns={stats.num_turns} tool_uses={stats.tool_use_count} "
        f"tokens={stats.usage.total} last={stats.activities[-1] if stats.activities else '-'}\n"
    )
    append_output(path, line)


def append_output(path: str | Path, text: str) -> None:
    """Append to a task's output file (never through a symlink); a vanished file is skipped."""
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
