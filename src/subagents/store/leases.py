"""Lease files: ``<agent id>.lease``, naming the one process allowed to run or recover a child.

A lease is created with ``O_CREAT | O_EXCL`` (so of two processes creating it one loses) and
holds the owner's PID, start identity and host. A lease whose holder is dead by its process
identity (so a reused PID does not keep a dead owner's lease) is stale and may be taken over.
The check-then-replace of a takeover is only safe because ``FileStore`` runs every lease
operation under its directory lock; these functions assume the caller holds it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from subagents.store.atomic import FILE_MODE, fsync_dir, read_private
from subagents.store.process_identity import ProcessIdentity

LEASE_SUFFIX = ".lease"

_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def read_lease(path: Path) -> ProcessIdentity | None:
    """The holder named by a lease file; None if missing or unreadable (a torn create)."""
    found = read_private(path)
    if found is None:
        return None
    try:
        return ProcessIdentity.from_dict(json.loads(found[0]))
    except (ValueError, TypeError, AttributeError):
        return None


def _try_create(path: Path, owner: ProcessIdentity) -> bool:
    try:
        fd = os.open(path, _CREATE_FLAGS, FILE_MODE)
    except FileExistsError:
        return False
    try:
        body = {**owner.to_dict(), "acquiredAt": time.time()}
        os.write(fd, json.dumps(body).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)
    return True


def take_lease(
    path: Path, owner: ProcessIdentity, *, alive: Callable[[ProcessIdentity], bool]
) -> bool:
    """Hold the lease at ``path`` for ``owner``; False while a live other owner holds it."""
    if _try_create(path, owner):
        return True
    holder = read_lease(path)
    if holder == owner:
        return True
    if holder is not None and alive(holder):
        return False
    path.unlink(missing_ok=True)
    return _try_create(path, owner)


def release_lease(path: Path, owner: ProcessIdentity) -> None:
    """Remove the lease only if ``owner`` holds it."""
    if read_lease(path) == owner:
        path.unlink(missing_ok=True)
        fsync_dir(path.parent)
