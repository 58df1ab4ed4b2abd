"""``Supervisor``: the watch kept on background children — progress lines and stall timeouts.

A background child nobody waits for is watched: a check every ``check_s`` compares its activity
(turns, tool uses, tokens) with the last check's; a change appends a ``[progress]`` line to its
output file, and no change for ``stall_s`` aborts it (``Child.stall``: it ends failed with its
partial result). When its task ends, ``on_done`` runs (the children's manager finalizes it).

A done-callback and one re-arming timer per child rather than a supervising task: with 1,000
children a task each (its coroutine, futures and per-wait sets) costs CPU per check and gives
the garbage collector twice the live objects to scan. The supervisor keeps no reference to the
manager (``on_done`` rides on the child's own task), so no reference cycle outlives a child.
"""

from __future__ import annotations

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
        self.watched = 0
        """Children watched and not yet forgotten (``expecting_notifications`` asks it at every
        wake-up of a waiting inbox: a scan of 1,000 children each time would add up)."""

    def watch(self, child: Child, on_done: Callable[[Child], None]) -> None:
        """Start watching ``child``; ``on_done(child)`` runs as soon as its task is done."""
        self.watched += 1
        loop = child.task.get_loop()
        child.check_timer = loop.call_later(self.check_s, self._scheduled_check, child)

        def done(_: object) -> None:
            on_done(child)

        child.task.add_done_callback(done)

    def forget(self, child: Child) -> None:
        """``child`` has ended: no more checks."""
        if child.check_timer is not None:
            child.check_timer.cancel()
            child.check_timer = None
            self.watched -= 1

    def _scheduled_check(self, child: Child) -> None:
        """One stall check, then the next one is scheduled (a method, not a closure that
        re-schedules itself: that would be a reference cycle)."""
        if child.task.done() or child.finalized:
            return
        self._check(child)
        loop = child.task.get_loop()
        child.check_timer = loop.call_later(self.check_s, self._scheduled_check, child)

    def _check(self, child: Child) -> None:
        stats = child.run.stats
        activity = (stats.num_turns, stats.tool_use_count, stats.usage.total)
        now = time.monotonic()
        if activity != child.activity:
            child.activity, child.last_progress = activity, now
            _write_progress(child)
            return
        stalled = self.stall_s > 0 and now - child.last_progress >= self.stall_s
        if stalled and child.stalled_ms is None:
            child.stall(int((now - child.last_progress) * 1000))


def _write_progress(child: Child) -> None:
    path = child.state.output_path
    if path is None:
        return
    stats = child.run.stats
    line = (
        f"[progress] turns={stats.num_turns} tool_uses={stats.tool_use_count} "
        f"tokens={stats.usage.total} last={stats.activities[-1] if stats.activities else '-'}\n"
    )
    append_output(path, line)


def append_output(path: Path, text: str) -> None:
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
