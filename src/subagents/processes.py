"""Tracking of the OS processes an agent started, so none outlives its owner.

Every shell a tool starts runs in its own process group (``start_new_session=True``), so one
``killpg`` reaches the shell and everything it spawned. A process is tracked from spawn until it
has been reaped; while it is unreaped its PID cannot be reused, so killing a tracked group never
hits a stranger.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable


class ProcessTracker:
    """The live process groups of one agent (or of the whole session, at the root)."""

    __slots__ = ("_groups", "on_add")

    def __init__(self, on_add: Callable[[int], None] | None = None) -> None:
        self._groups: set[int] | None = None
        """Made at the first group: every agent has a tracker, few start a process."""
        self.on_add = on_add
        """Called with each new group (a child records it on disk for crash recovery)."""

    def add(self, pgid: int) -> None:
        if self._groups is None:
            self._groups = set()
        self._groups.add(pgid)
        if self.on_add is not None:
            self.on_add(pgid)

    def discard(self, pgid: int) -> None:
        if self._groups is not None:
            self._groups.discard(pgid)

    @property
    def groups(self) -> frozenset[int]:
        return frozenset(self._groups or ())

    def kill_all(self, sig: int = signal.SIGKILL) -> list[int]:
        """Signal every tracked group; returns the groups signalled. Safe to call twice."""
        killed: list[int] = []
        for pgid in list(self._groups or ()):
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


async def open_pipe_reader(read_fd: int) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    """An asyncio stream over our end of an output pipe (the fd is closed if this fails).

    A child's output goes to a pipe of our own rather than asyncio's ``PIPE``: asyncio's
    ``Process.wait()`` also waits for every pipe it made to close, so a grandchild holding
    stdout would keep ``wait()`` from returning after the child itself has exited."""
    pipe = os.fdopen(read_fd, "rb", 0)
    reader = asyncio.StreamReader()
    try:
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe
        )
    except BaseException:
        pipe.close()
        raise
    return reader, transport


RUN_TAG_VARIABLE = "SUBAGENTS_RUN_TAG"
"""Set in the environment of a process tree we must be able to end completely (hooks)."""

_PROC = "/proc"


def kill_tagged(tag: str, sig: int = signal.SIGKILL, *, passes: int = 3) -> list[int]:
    """Signal every process whose environment carries ``SUBAGENTS_RUN_TAG=<tag>``.

    A process group is not a process tree: a hook that runs ``setsid daemon &`` (or
    double-forks) puts the daemon in a session of its own, reparented to init, where no
    ``killpg`` reaches it. Its environment still holds the tag it inherited, and
    ``/proc/<pid>/environ`` shows it: so the tree is found by the tag, without cgroups and
    without making this process a subreaper (which would make it reap every orphan of every
    tool). A process that clears its environment (``env -i``) escapes; without ``/proc`` (not
    Linux) nothing is found and only the group kill applies. Repeated ``passes`` times, since a
    dying tree may still fork. Returns the PIDs signalled. Costs one read per process on the
    machine (about 10 µs each)."""
    needle = f"{RUN_TAG_VARIABLE}={tag}".encode()
    me = os.getpid()
    killed: list[int] = []
    for _ in range(passes):
        found = [pid for pid in _pids() if pid != me and _has_tag(pid, needle)]
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                continue
            killed.append(pid)
    return killed


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir(_PROC) if name.isdigit()]
    except OSError:
        return []


def _has_tag(pid: int, needle: bytes) -> bool:
    try:
        with open(f"{_PROC}/{pid}/environ", "rb") as handle:
            data = handle.read()
    except OSError:  # gone, or another user's
        return False
    return needle in data.split(b"\0")
