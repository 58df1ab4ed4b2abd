"""Who owns a running child: a PID plus the identity of the process that had that PID.

A PID alone is not an owner: after a crash and a reboot (or just enough churn) the kernel hands
the same number to an unrelated process, and a recovery that trusted the number would leave an
orphan marked ``running`` forever, or refuse to take over its lease. So a running sidecar and a
lease record the process *start identity*: the start time from ``/proc/<pid>/stat`` (field 22,
in clock ticks since boot) joined with the boot id. Both together are unique for the lifetime of
a machine's uptime, and the boot id makes a record from before a reboot never match.

``is_alive`` is deliberately asymmetric about what it cannot verify:

- another host's process cannot be probed, so it counts as alive: a local recovery must never
  steal the lease of a child running elsewhere (a store every node reaches keeps heartbeats
  instead: ``capabilities.OwnerHeartbeats``, consulted by ``recovery.owner_liveness``);
- a record without a start identity (schema version 1, or a system without ``/proc``) counts as
  alive only while the PID exists *and* the record is younger than ``LEGACY_WINDOW_S`` (10 min);
  past that we would rather recover a live child's run twice than leave a dead one running.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LEGACY_WINDOW_S = 600.0
"""How long a record without a start identity is trusted while its PID exists."""

_PROC = Path("/proc")
_START_TIME_FIELD = 22
"""``starttime`` in proc(5) numbering; fields after the command's closing ``)`` start at 3."""


@dataclass(kw_only=True, frozen=True)
class ProcessIdentity:
    """A process as recorded in a sidecar or lease: ``pid`` is not enough on its own."""

    pid: int
    start_identity: str | None = None
    """``<start ticks>@<boot id>`` (or just the ticks when the boot id is unknown); None if
    the system offers no way to read it, or the record predates schema version 2."""
    hostname: str | None = None
    """The machine the process runs on; None in old records (taken to mean this machine)."""

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "startIdentity": self.start_identity, "hostname": self.hostname}

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = "process") -> ProcessIdentity:
        pid = data.get("pid")
        start = data.get("startIdentity")
        host = data.get("hostname")
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            raise ValueError(f"{where}.pid: expected a positive integer, got {pid!r}")
        if start is not None and not isinstance(start, str):
            raise ValueError(f"{where}.startIdentity: expected a string or null, got {start!r}")
        if host is not None and not isinstance(host, str):
            raise ValueError(f"{where}.hostname: expected a string or null, got {host!r}")
        return cls(pid=pid, start_identity=start, hostname=host)


def _proc_stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of ``/proc/<pid>/stat``; the command name may hold spaces and ``)``."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    _, sep, rest = raw.rpartition(")")
    return rest.split() if sep else None


def boot_id() -> str | None:
    """This boot's random id, so a start time from before a reboot never matches."""
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def start_identity(pid: int) -> str | None:
    """The start identity of the process that has ``pid`` now, or None if unknown/gone."""
    fields = _proc_stat_fields(pid)
    index = _START_TIME_FIELD - 3
    if fields is None or len(fields) <= index:
        return None
    boot = boot_id()
    return f"{fields[index]}@{boot}" if boot else fields[index]


def current_identity() -> ProcessIdentity:
    """The identity of this process, as a running sidecar or a lease records it."""
    pid = os.getpid()
    return ProcessIdentity(pid=pid, start_identity=start_identity(pid), hostname=hostname())


HOST_ID_ENV = "SUBAGENTS_HOST_ID"
"""Names this node in identities instead of its hostname: for nodes that share a hostname
(containers), and for tests that play two hosts on one machine."""


def hostname() -> str:
    return os.environ.get(HOST_ID_ENV) or socket.gethostname()


def pid_exists(pid: int) -> bool:
    """True if some non-zombie process has ``pid`` (a zombie has finished its work)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    fields = _proc_stat_fields(pid)
    return not (fields and fields[0] == "Z")


def is_alive(
    identity: ProcessIdentity,
    *,
    recorded_at: float | None = None,
    clock: Callable[[], float] = time.time,
) -> bool:
    """Whether the process ``identity`` describes is still running (see the module docstring).

    ``recorded_at`` (epoch seconds, e.g. the sidecar's ``lastActiveAt``) only matters for a
    record without a start identity: without it such a record is never taken for alive.
    """
    if identity.hostname is not None and identity.hostname != hostname():
        return True
    if not pid_exists(identity.pid):
        return False
    if identity.start_identity is None:
        return recorded_at is not None and clock() - recorded_at < LEGACY_WINDOW_S
    return start_identity(identity.pid) == identity.start_identity
