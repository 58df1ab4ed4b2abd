"""Which sessions a process is running: an advisory lock per session on its own file.

A running session holds ``sessions/<id>.lock`` shared (``flock``) from its first turn until it
closes; ``subagents compact`` (``Session.compact`` of a saved session) takes it exclusively
without waiting, so it refuses a session another process is running — both would append to the
transcript and the running one would go on from a history that no longer exists. Shared, not
exclusive, for the running side: two processes resuming one session is allowed as before.
The kernel drops a lock when its process ends, kill -9 included, so a crash leaves nothing to
clean up (the empty file stays; it costs one inode per session).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path


class SessionBusy(Exception):
    """Another process holds the session."""


def hold_shared(path: Path) -> int:
    """Lock ``path`` shared now, or raise ``SessionBusy`` while a compaction holds it; the
    descriptor is the lock: ``release`` it when the session ends."""
    return _lock(path, fcntl.LOCK_SH)


def take_exclusive(path: Path) -> int:
    """Lock ``path`` exclusively now, or raise ``SessionBusy`` if a running session holds it."""
    return _lock(path, fcntl.LOCK_EX)


def _lock(path: Path, kind: int) -> int:
    # Never wait: the holder may be a model call away from letting go (seconds to minutes).
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise SessionBusy(str(path)) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def release(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
