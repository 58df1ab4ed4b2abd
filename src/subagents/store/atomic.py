"""Private, crash-safe files: atomic replace, ``0600`` files, ``0700`` directories, no symlinks.

``write_atomic`` is the classic sequence: write a temp file in the same directory, ``fsync`` it,
``rename`` it over the target, ``fsync`` the directory. A crash at any point leaves either the
old file or the new one, never a torn mix; at worst a ``.<name>.<random>.tmp`` file stays behind,
which readers ignore (their names never end in ``.json``).

Sidecars hold prompts and results, and the state folder may sit on a shared machine, so nothing
here follows a symlink: the temp file is opened ``O_EXCL | O_NOFOLLOW`` under a random name, a
target that is a symlink is refused (``UnsafePathError``) instead of replaced, and reads open with
``O_NOFOLLOW`` too.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from subagents.store.errors import UnsafePathError

FILE_MODE = 0o600
DIR_MODE = 0o700

_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


def ensure_private_tree(top: Path, leaf: Path) -> None:
    """Create ``top`` and every directory down to ``leaf`` as ``0700``, tightening existing ones.

    ``Path.mkdir(parents=True)`` would give intermediate directories the umask's mode, which
    leaves e.g. ``projects/<slug>`` world-readable; so each level is made and checked here.
    Directories above ``top`` are not ours and are left alone.
    """
    relative = leaf.relative_to(top)
    top.parent.mkdir(parents=True, exist_ok=True)
    current = top
    _ensure_private_dir(current)
    for part in relative.parts:
        current = current / part
        _ensure_private_dir(current)


def _ensure_private_dir(path: Path) -> None:
    try:
        path.mkdir(mode=DIR_MODE)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise UnsafePathError(f"{path}: expected a directory, found a symlink or file")
    if info.st_mode & 0o077 and info.st_uid == os.getuid():
        os.chmod(path, DIR_MODE)


def refuse_symlink(path: Path) -> None:
    """Raise ``UnsafePathError`` if ``path`` is a symlink (a missing path is fine)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePathError(f"{path}: is a symlink; refusing to write through it")


def write_atomic(path: Path, data: bytes) -> os.stat_result:
    """Replace ``path`` with ``data`` atomically and durably; returns the new file's stat."""
    refuse_symlink(path)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temp, _WRITE_FLAGS, FILE_MODE)
    try:
        try:
            os.fchmod(fd, FILE_MODE)  # the umask may have taken bits away, never add them
            _write_all(fd, data)
            os.fsync(fd)
            info = os.fstat(fd)
        finally:
            os.close(fd)
        os.rename(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return info


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fsync_dir(path: Path) -> None:
    """Make a rename or create in ``path`` durable (a no-op where directories cannot be synced)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)


def read_private(path: Path) -> tuple[bytes, os.stat_result] | None:
    """The contents and stat of ``path``, None if missing; a symlink raises ``UnsafePathError``."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(f"{path}: is a symlink; refusing to read through it") from exc
        raise
    try:
        info = os.fstat(fd)
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks), info
    finally:
        os.close(fd)
