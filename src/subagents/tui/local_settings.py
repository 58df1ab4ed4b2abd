"""Adding an allow rule to the project's ``.claude/settings.local.json`` ("always allow").

The file is Claude Code's own (personal, not committed): we add the rule to
``permissions.allow`` when it is not there yet and keep everything else as it was. The new text
is written beside the file and moved over it (``os.replace``), so a crash leaves the old file or
the new one, never half of one. A symlink, FIFO or other non-file at that path, a file that is
not a JSON object, or one too large to be settings is reported and left untouched (the rule
then holds for this session only).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

MAX_BYTES = 1 << 20
"""A settings file larger than this is not one: refuse rather than read it whole."""


class LocalSettingsError(Exception):
    """The rule could not be saved; the message names the file and why."""


def local_settings_path(project: Path) -> Path:
    return project / ".claude" / "settings.local.json"


def add_allow_rule(project: Path, rule: str) -> Path:
    """Add ``rule`` to ``permissions.allow`` of the project's local settings; the file."""
    path = local_settings_path(project)
    data = _read(path)
    permissions = data.setdefault("permissions", {})
    if not isinstance(permissions, dict):
        raise LocalSettingsError(f"{path}: 'permissions' is not an object; rule not saved")
    allow = permissions.setdefault("allow", [])
    if not isinstance(allow, list):
        raise LocalSettingsError(f"{path}: 'permissions.allow' is not a list; rule not saved")
    if rule not in allow:
        allow.append(rule)
    _write(path, data)
    return path


def _read(path: Path) -> dict[str, Any]:
    raw = _read_bytes(path)
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise LocalSettingsError(f"{path}: not valid JSON ({exc}); rule not saved")
    if not isinstance(data, dict):
        raise LocalSettingsError(f"{path}: not a JSON object; rule not saved")
    return data


def _read_bytes(path: Path) -> bytes:
    """The file's bytes; opened without blocking (a FIFO there must not hang the UI)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return b""
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LocalSettingsError(f"{path}: is a symlink; rule not saved")
        raise LocalSettingsError(f"{path}: cannot read it ({exc.strerror}); rule not saved")
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LocalSettingsError(f"{path}: not a regular file; rule not saved")
        raw = handle.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise LocalSettingsError(f"{path}: larger than {MAX_BYTES} bytes; rule not saved")
    return raw


def _write(path: Path, data: dict[str, Any]) -> None:
    temp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".settings.local.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
        os.replace(temp, path)
        temp = None
    except OSError as exc:
        raise LocalSettingsError(f"{path}: cannot write it ({exc.strerror}); rule not saved")
    finally:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)
