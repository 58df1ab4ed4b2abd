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
import functools
import os
import stat as stat_module
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from subagents.store.atomic import file_system_kind
from subagents.tools import beneath
from subagents.tools.base import ToolContext, ToolError
from subagents.tools.paths import (
    allowed_roots,
    is_inside,
    plain_path,
    refuse_denied_read,
    resolve_path,
    roots_of,
)

INLINE_FILE_SYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "bcachefs", "zfs", "jfs", "overlay"}
    | {"tmpfs", "ramfs", "vfat", "exfat", "ntfs3", "squashfs", "erofs", "iso9660", "udf"}
)
"""Local file systems: there a file tool's small read or write runs on the event loop (a thread
hand-off per call cost several times the work: docs/performance.md, rule 1). Anything else
(NFS, SMB, FUSE, or not known) is worked on in a worker thread, where a slow or hung server
stops one call instead of every agent."""


def is_local(device: int) -> bool:
    """Whether ``device`` (an ``st_dev``) is on a file system in ``INLINE_FILE_SYSTEMS``."""
    local = _local_devices.get(device)
    if local is None:
        local = _local_devices[device] = file_system_kind(device) in INLINE_FILE_SYSTEMS
    return local


_local_devices: dict[int, bool] = {}
"""``is_local`` per device, asked once: the mount table it reads is read once per process
(``store.atomic.file_system_kind``), and every Read of a small file asks about its device."""


def on_local_disks(ctx: ToolContext) -> bool:
    """Whether every allowed root of ``ctx`` is on a local file system."""
    found = roots_of(ctx)
    local = found.local
    if local is None:
        local = found.local = all(_root_is_local(root) for root in found.resolved)
    return local


@functools.lru_cache(maxsize=256)
def _root_is_local(root: Path) -> bool:
    try:
        return is_local(os.stat(root).st_dev)
    except OSError:
        return False


_DIR_FLAGS = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)
_FILE_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
"""Added to every file open. ``O_NONBLOCK``: a FIFO or device swapped in after the ``lstat``
cannot block the open (the ``fstat`` after it refuses it); ``O_NOCTTY``: a terminal swapped in
must not become the controlling terminal of a session leader without one (``subagents -p``
under ``setsid``, a daemon), which Linux does at a plain ``open`` of a tty."""


class SymlinkOnPath(ToolError):
    """A component of the path is a symbolic link now (``ELOOP`` from ``O_NOFOLLOW``, or the
    last component seen as one). A caller that opened a path it had not resolved
    (``open_tool_path``'s shortcut) resolves it and tries again; for a resolved path it means
    something was swapped in after the check, and the message says so."""


@dataclass(slots=True)
class OpenedFile:
    """A descriptor of a regular file, whether the file existed before this open, and its
    ``fstat`` right after the open. (Not frozen: a frozen dataclass sets each field through
    ``object.__setattr__``, and one is made per file tool call; nothing changes it.)"""

    fd: int
    existed: bool
    stat: os.stat_result


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


def open_tool_path(
    raw: str,
    ctx: ToolContext,
    flags: int,
    *,
    explain: Callable[[str, OSError], ToolError],
    denied_reads: bool = True,
    make_parents: bool = False,
) -> tuple[str, OpenedFile]:
    """The resolved path a file tool's ``raw`` path names, and that file opened below its root.

    The usual path has no symbolic link in it, and then resolving it (an ``lstat`` per
    component) only says what the text already says: it is opened as written
    (``paths.plain_path``), one component at a time with ``O_NOFOLLOW`` as always. If a
    component is a link, that open fails before anything is read (``SymlinkOnPath``), and the
    path is resolved (``resolve_path``: the link followed, the result confined) and opened again
    the same way. ``denied_reads``: deny rules are checked on the resolved path
    (``refuse_denied_read``) before anything is read (on the plain way: once the open has
    shown that it is the resolved path; an open that may create the file is preceded by the
    check on the plain path too). ``explain`` turns an ``OSError`` of the open (a missing
    file, a directory) into the tool's message for that path. ``make_parents`` creates
    missing folders (``open_confined``)."""
    plain = plain_path(raw, ctx)
    if plain is not None:
        root, below = plain
        path = f"{root}/{below}" if root != "/" else f"/{below}"
        if denied_reads and flags & os.O_CREAT:
            refuse_denied_read(path, ctx)  # nothing may be made where reading is denied
        try:
            opened = _open_whole(path, flags) if not flags & os.O_CREAT else None
            if opened is None:
                opened = _open_below(root, below.split("/"), path, flags, make_parents)
        except SymlinkOnPath:
            pass  # a link on the way: resolve it (it may lead outside) and open the result
        except OSError as exc:
            raise explain(path, exc) from None
        else:  # no link on the way: ``path`` is the resolved path
            if denied_reads:
                _refuse_opened(opened, path, ctx)
            return path, opened
    resolved = resolve_path(raw, ctx)
    path = str(resolved)
    if denied_reads:
        refuse_denied_read(path, ctx)
    try:
        return path, open_confined(resolved, allowed_roots(ctx), flags, make_parents=make_parents)
    except OSError as exc:
        raise explain(path, exc) from None


def _open_whole(path: str, flags: int) -> OpenedFile | None:
    """``path`` (absolute, no ``..``) opened in one call that follows no link
    (``beneath.whole_opener``: ``openat2``, or an open checked through ``/proc``) when it is
    a regular file now; None: take the walk, which also says what anything else is (missing,
    a folder, a FIFO, a link)."""
    opener = beneath.whole_opener(flags)
    if opener is None:
        return None
    try:
        before = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    if not stat_module.S_ISREG(before.st_mode):
        return None
    try:
        fd = opener(path, flags | _FILE_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link on the way, or swapped in since the stat
            raise SymlinkOnPath(f"{path}: a symbolic link on the way") from None
        raise
    if fd is None:
        return None
    status = os.fstat(fd)
    if not stat_module.S_ISREG(status.st_mode):  # swapped in since the stat (O_NONBLOCK)
        os.close(fd)
        raise ToolError(_special(path, status.st_mode))
    return OpenedFile(fd, True, status)


def _refuse_opened(opened: OpenedFile, path: str, ctx: ToolContext) -> None:
    """``refuse_denied_read`` after the open (nothing read yet), closing a refused file."""
    try:
        refuse_denied_read(path, ctx)
    except BaseException:
        os.close(opened.fd)
        raise


def open_confined(
    path: Path, roots: tuple[Path, ...], flags: int, *, make_parents: bool = False
) -> OpenedFile:
    """Open the resolved ``path`` below the root holding it, refusing symlinks on the way.

    ``flags`` are the access flags (``O_RDONLY``, ``O_WRONLY | O_CREAT | O_TRUNC``...).
    ``make_parents`` creates missing directories (each one relative to its parent's
    descriptor). Raises ``FileNotFoundError`` for a missing file or directory,
    ``IsADirectoryError`` for a directory, ``SymlinkOnPath`` for a symbolic link met on the
    way, and ``ToolError`` for anything else refused.
    """
    root = _root_of(path, roots)
    return _open_below(str(root), path.relative_to(root).parts, path, flags, make_parents)


def _open_below(
    root: str, parts: tuple[str, ...] | list[str], path: Path | str, flags: int, make_parents: bool
) -> OpenedFile:
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    directory = _open_dir(root, None, path)
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


def _descend(directory: int, part: str, path: Path | str, make: bool) -> int:
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


def _open_dir(name: str, directory: int | None, path: Path | str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=directory)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # O_PATH: a symlink is ENOTDIR
            raise _refusal(path, name, directory, exc) from None
        raise


def _open_file(directory: int, name: str, path: Path | str, flags: int) -> OpenedFile:
    existed = True
    try:
        before = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        existed = False
    else:
        if not stat_module.S_ISREG(mode := before.st_mode):
            if stat_module.S_ISDIR(mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
            if stat_module.S_ISLNK(mode):
                raise SymlinkOnPath(_special(path, mode))
            raise ToolError(_special(path, mode))
    try:
        fd = os.open(name, flags | _FILE_FLAGS, 0o666, dir_fd=directory)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # a symlink or a FIFO swapped in
            raise _refusal(path, name, directory, exc) from None
        raise
    status = os.fstat(fd)
    if not stat_module.S_ISREG(status.st_mode):
        os.close(fd)
        raise ToolError(_special(path, status.st_mode))
    return OpenedFile(fd, existed, status)


def _special(path: Path | str, mode: int) -> str:
    return (
        f"{path} is {kind_of(mode)}, not a regular file; the file tools only read and write "
        "regular files (a pipe or device could block or never end)."
    )


def _refusal(path: Path | str, name: str, directory: int | None, exc: OSError) -> ToolError:
    """Why a component could not be opened: a plain file where a directory is needed, or
    something (a symlink, a FIFO) that was not there when the path was checked."""
    try:
        mode = os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode
    except OSError:
        mode = 0
    if stat_module.S_ISREG(mode) and exc.errno == errno.ENOTDIR:
        return ToolError(f"Cannot use {path}: '{name}' is a file, not a directory.")
    found = kind_of(mode) if mode else "gone"
    kind = SymlinkOnPath if stat_module.S_ISLNK(mode) or exc.errno == errno.ELOOP else ToolError
    return kind(
        f"Refused {path}: '{name}' is now {found}, not what it was when the path was checked "
        f"({exc.strerror}); something was put in its place meanwhile. Nothing was read or "
        "written."
    )
