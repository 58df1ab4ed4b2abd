"""Files shared between the processes of a team: locks, atomic JSON, names that are file names.

Every read-check-write of shared state holds an ``flock`` on a lock file of its folder, so two
processes never both win a claim and no update is lost; every rewrite is temp file + fsync +
rename (``store.atomic.write_atomic``), so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from subagents.state import ensure_private_dir
from subagents.store.atomic import append_locked, read_private, write_atomic

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
LEAD_NAME = "team-lead"


class TeamError(Exception):
    """A team operation that cannot be done; the message says why (shown to the model)."""


def checked_name(value: str, what: str) -> str:
    """A team or member name: it becomes a file name, so no ``/``, no ``..``, no spaces."""
    name = value.strip()
    if not NAME_PATTERN.fullmatch(name):
        raise TeamError(
            f"{what} {value!r} is not valid: use 1-64 letters, digits, '-' or '_', "
            "starting with a letter or digit"
        )
    return name


@contextlib.contextmanager
def locked(path: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold ``flock`` on ``path`` (created 0600) for the block."""
    ensure_private_dir(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, None when missing; a corrupt file raises ``TeamError``."""
    found = read_private(path)
    if found is None:
        return None
    try:
        data = json.loads(found[0])
    except ValueError as exc:
        raise TeamError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise TeamError(f"{path}: expected a JSON object")
    return data


def write_json(path: Path, data: dict[str, Any]) -> None:
    ensure_private_dir(path.parent)
    write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False).encode())


def append_line(path: Path, data: dict[str, Any]) -> None:
    """Append one JSON line with one ``write`` under the file's own ``flock``."""
    ensure_private_dir(path.parent)
    append_locked(path, (json.dumps(data, ensure_ascii=False) + "\n").encode())
