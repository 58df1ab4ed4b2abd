"""Leftover processes of a child: recorded as they start, killed by crash recovery.

A child's shells run in their own process groups (``start_new_session=True``), so they survive a
SIGKILL of the runtime that started them. While the runtime lives, ``ProcessTracker`` kills them;
after a crash only the disk remembers them. So every group a child's tracker adds is appended to
``<agents dir>/<agent id>.pids`` as one ``<pgid> <start identity>`` line (file ``0600``, opened
``O_APPEND | O_NOFOLLOW`` so a planted symlink cannot redirect the write).

Recovery (``kill_leftovers``) never trusts the number alone — a PID is reused sooner or later:

* the leader still exists with the recorded start identity → the group is ours: kill it (unless
  the leader is an unreaped zombie and no member is alive: then nothing is left to kill);
* the leader exists with another identity → a stranger reuses the PID: leave it alone;
* the leader is gone but the group still has members → kill it: Linux does not hand out a number
  still in use as a process-group id, so the group can only be the one we recorded;
* nothing left → nothing to do.

Lines are appended and never rewritten; a group that ended normally stays listed and is simply
found gone (or reused, and then skipped) at recovery.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path

from subagents.processes import kill_group
from subagents.store.process_identity import pid_exists, start_identity

log = logging.getLogger(__name__)

PIDS_SUFFIX = ".pids"
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def pids_path(transcript: Path) -> Path:
    """The leftover-process file next to a child's transcript (``<agent id>.pids``)."""
    return transcript.with_suffix(PIDS_SUFFIX)


def record_group(path: Path, pgid: int) -> None:
    """Append ``pgid`` and its leader's start identity (``-`` when unknown)."""
    identity = start_identity(pgid) or "-"
    try:
        fd = os.open(path, _APPEND_FLAGS, 0o600)
    except OSError as exc:
        log.warning("cannot record process group %s in %s: %s", pgid, path, exc)
        return
    try:
        os.write(fd, f"{pgid} {identity}\n".encode())
    finally:
        os.close(fd)


def group_recorder(path: Path) -> Callable[[int], None]:
    """A ``ProcessTracker.on_add`` callback that records groups in ``path``."""
    return _GroupRecorder(path, pids=False)


def transcript_group_recorder(transcript: str | Path) -> Callable[[int], None]:
    """``group_recorder(pids_path(transcript))``, the pids path made only when a group comes: most
    children start no process, and every child's tracker gets one of these."""
    return _GroupRecorder(transcript, pids=True)


class _GroupRecorder:
    """Slots, not a closure: one tracked object per child instead of a function, its cell tuple,
    a cell and a parsed path (``docs/performance.md``, the swarm)."""

    __slots__ = ("path", "pids")

    def __init__(self, path: str | Path, *, pids: bool) -> None:
        self.path, self.pids = path, pids  # (a child's transcript comes as text)

    def __call__(self, pgid: int) -> None:
        # ``pids_path`` per group, not kept: a group is a process start, which costs far more.
        path = Path(self.path)
        record_group(pids_path(path) if self.pids else path, pgid)


def read_groups(path: Path) -> list[tuple[int, str | None]]:
    """``(pgid, start identity)`` pairs of a pids file; malformed lines are skipped."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    groups: list[tuple[int, str | None]] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and int(parts[0]) > 0:
            groups.append((int(parts[0]), None if parts[1] == "-" else parts[1]))
    return groups


def group_has_members(pgid: int) -> bool:
    """Whether a live (non-zombie) process is in group ``pgid``.

    ``killpg(pgid, 0)`` alone is not enough: a killed process whose parent died is reparented,
    and where nothing reaps it (a container's PID 1) it stays a zombie in its group forever."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    for entry in os.scandir(proc):
        if entry.name.isdigit() and _live_member(Path(entry.path) / "stat", pgid):
            return True
    return False


def _live_member(stat_path: Path, pgid: int) -> bool:
    try:
        raw = stat_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    fields = raw.rpartition(")")[2].split()
    return len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z"


def is_our_group(pgid: int, identity: str | None) -> bool:
    """Whether ``pgid`` is still the group we recorded (see the module docstring)."""
    if pid_exists(pgid):
        if identity is None or start_identity(pgid) != identity:
            return False
        # A killed leader nothing has reaped yet is a zombie: still "existing", same identity,
        # yet nothing of the group may be alive any more.
        return _live_member(Path(f"/proc/{pgid}/stat"), pgid) or group_has_members(pgid)
    return group_has_members(pgid)


def kill_leftovers(path: Path, sig: int = signal.SIGKILL) -> list[int]:
    """Kill every recorded group that is verifiably still ours; returns the groups signalled."""
    killed: list[int] = []
    for pgid, identity in read_groups(path):
        if pgid in killed or not is_our_group(pgid, identity):
            continue
        if kill_group(pgid, sig):
            killed.append(pgid)
    return killed
