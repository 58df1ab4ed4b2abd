"""Opening a confined file without a race: one component at a time, below a root descriptor.

``paths.resolve_path`` checks where a path leads *now*; a plain ``open`` a moment later walks the
path again, and a directory swapped for a symlink in between takes it outside the root (1 Write
of 300 landed outside while a symlink was being swapped). So the file tools open what they read
and write through ``open_confined``: a descriptor of the (resolved) root, then each directory
below it opened relative to the previous one with ``O_NOFOLLOW | O_DIRECTORY``, then the file
itself with ``O_NOFOLLOW``: a symlink met on the way fails with ``ELOOP`` instead of being
followed, whatever was swapped in after the check. ``resolve_path`` has already resolved every
legitimate symlink, so the path handed in contains none.

Only regular files are opened. The last component is looked at first (``fstatat`` without
following): a FIFO, socket or device is refused before any ``open`` could block on it or read
it without end, and the opened descriptor is checked again (``fstat``), with ``O_NONBLOCK`` so
that even a FIFO swapped in at that instant cannot hang the call.

Cost: one ``open``/``close`` per directory level below the root plus one ``fstatat`` and one
``fstat`` — a few microseconds per call (figures in docs/tools.md).
"""

from __future__ import annotations

import errno
import os
import stat as stat_module
from dataclasses import dataclass
from pathlib import Path

from subagents.tools.base import ToolError
from subagents.tools.paths import is_inside

_DIR_FLAGS = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)
_FILE_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


@dataclass(frozen=True, slots=True)
class OpenedFile:
    """A descriptor of a regular file, and whether the file existed before this open."""

    fd: int
    existed: bool


def kind_of(mode: int) -> str:
    """A file type in words, for messages."""
    if stat_module.S_ISDIR(mode):
        return "a directory"
    if stat_module.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat_module.S_ISSOCK(mode):
        return "a socket"
    if stat_module.S_ISCHR(mode) or stat_module.S_ISBLK(mode):
        return "a device"
    if stat_module.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def open_confined(
    path: Path, roots: tuple[Path, ...], flags: int, *, make_parents: bool = False
) -> OpenedFile:
    """Open the resolved ``path`` below the root holding it, refusing symlinks on the way.

    ``flags`` are the access flags (``O_RDONLY``, ``O_WRONLY | O_CREAT | O_TRUNC``...).
    ``make_parents`` creates missing directories (each one relative to its parent's
    descriptor). Raises ``FileNotFoundError`` for a missing file or directory,
    ``IsADirectoryError`` for a directory, and ``ToolError`` for anything else refused.
    """
    root = _root_of(path, roots)
    parts = path.relative_to(root).parts
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    directory = _open_dir(os.fspath(root), None, path)
    try:
        for part in parts[:-1]:
            child = _descend(directory, part, path, make_parents)
            os.close(directory)
            directory = child
        return _open_file(directory, parts[-1], path, flags)
    finally:
        os.close(directory)


def _root_of(path: Path, roots: tuple[Path, ...]) -> Path:
    inside = [root for root in roots if is_inside(path, root)]
    if not inside:
        raise ToolError(f"{path} is outside the allowed roots.")
    return max(inside, key=lambda root: len(root.parts))


def _descend(directory: int, part: str, path: Path, make: bool) -> int:
    """The descriptor of ``part`` below ``directory``, created first when ``make``."""
    try:
        return _open_dir(part, directory, path)
    except FileNotFoundError:
        if not make:
            raise
    try:
        os.mkdir(part, 0o777, dir_fd=directory)
    except FileExistsError:
        pass  # made meanwhile by a concurrent call: open it below
    return _open_dir(part, directory, path)


def _open_dir(name: str, directory: int | None, path: Path) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=directory)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ToolError(_refused(path, name, directory, exc)) from None
        raise


def _open_file(directory: int, name: str, path: Path, flags: int) -> OpenedFile:
    existed = True
    try:
        before = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        existed = False
    else:
        if stat_module.S_ISDIR(before.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        if not stat_module.S_ISREG(before.st_mode):
            raise ToolError(_special(path, before.st_mode))
    try:
        fd = os.open(name, flags | _FILE_FLAGS, 0o666, dir_fd=directory)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # a symlink or a FIFO swapped in
            raise ToolError(_refused(path, name, directory, exc)) from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat_module.S_ISREG(mode):
        os.close(fd)
        raise ToolError(_special(path, mode))
    return OpenedFile(fd=fd, existed=existed)


def _special(path: Path, mode: int) -> str:
    return (
        f"{path} is {kind_of(mode)}, not a regular file; the file tools only read and write "
        "regular files (a pipe or device could block or never end)."
    )


def _refused(path: Path, name: str, directory: int | None, exc: OSError) -> str:
    """Why a component could not be opened: a plain file where a directory is needed, or
    something (a symlink, a FIFO) that was not there when the path was checked."""
    try:
        mode = os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode
    except OSError:
        mode = 0
    if stat_module.S_ISREG(mode) and exc.errno == errno.ENOTDIR:
        return f"Cannot use {path}: '{name}' is a file, not a directory."
    found = kind_of(mode) if mode else "gone"
    return (
        f"Refused {path}: '{name}' is now {found}, not what it was when the path was checked "
        f"({exc.strerror}); something was put in its place meanwhile. Nothing was read or "
        "written."
    )
