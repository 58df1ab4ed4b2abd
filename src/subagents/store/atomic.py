"""Private, crash-safe files: atomic replace, ``0600`` files, ``0700`` directories, no symlinks.

``write_atomic`` is the classic sequence: write a temp file in the same directory, ``fsync`` it,
``rename`` it over the target, ``fsync`` the directory. ``stage_write`` + ``commit_writes`` is
the same sequence for many files at once (group commit: one ``syncfs`` instead of an ``fsync``
per file, one ``fsync`` per directory). A crash at any point leaves either the
old file or the new one, never a torn mix; at worst a ``.<name>.<random>.tmp`` file stays behind,
which readers ignore (their names never end in ``.json``).

Sidecars hold prompts and results, and the state folder may sit on a shared machine, so nothing
here follows a symlink: the temp file is opened ``O_EXCL | O_NOFOLLOW`` under a random name, a
target that is a symlink is refused (``UnsafePathError``) instead of replaced, and reads open with
``O_NOFOLLOW`` too.
"""

from __future__ import annotations

import errno
import functools
import itertools
import os
import re
import secrets
import stat
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


def refuse_symlink(path: str | Path) -> None:
    """Raise ``UnsafePathError`` if ``path`` is a symlink (a missing path is fine)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePathError(f"{path}: is a symlink; refusing to write through it")


def write_atomic(path: Path, data: bytes) -> os.stat_result:
    """Replace ``path`` with ``data`` atomically and durably; returns the new file's stat."""
    staged = stage_write(str(path), data)
    error = commit_writes([staged])[0]
    if error is not None:
        raise error
    return staged.info


@dataclass(slots=True)
class StagedWrite:
    """A temp file written next to its target but neither durable nor renamed yet.

    The descriptor stays open until ``commit_writes`` so the file can be ``fsync``-ed (or found
    on its file system for ``syncfs``) without reopening it. (Slots, and made by position in
    ``stage_write``: one per record written, 4.1 k instructions by keyword, 1.9 k so.)
    """

    path: str
    temp: str
    fd: int
    info: os.stat_result


def stage_write(
    path: str, data: bytes, *, target_checked: bool = False, reuse: str | None = None
) -> StagedWrite:
    """Write ``data`` to a fresh ``0600`` temp file beside ``path`` (no ``fsync`` yet).

    ``target_checked``: the caller has just ``lstat``-ed ``path`` under its lock and knows it
    is not a symlink, so the check is not repeated (one system call less per record).
    ``reuse``: a spare file of the caller's (an earlier version of some record, no longer
    linked anywhere else) to write into instead of creating one: on ext4 a new inode costs
    20-500 µs of kernel CPU depending on where its folder is on the disk, rewriting one a few.
    The spare is taken only if it is a regular file of ours with no other name (``st_nlink``
    1), so no live record is ever truncated; otherwise a fresh temp file is made.
    """
    if not target_checked:
        refuse_symlink(path)
    opened = None if reuse is None else _open_spare(reuse)
    if reuse is not None and opened is not None:
        temp, fd = reuse, opened
    else:
        # ``os.path.split`` and ``join`` as string slicing (two Python calls per record less):
        # ``folder`` keeps its separator, so "/x.json" stays in "/" and "x.json" in ".".
        cut = path.rfind("/") + 1
        temp, fd = _open_temp(path[:cut], path[cut:])
    try:
        _write_all(fd, data)
        if temp is reuse:
            # The spare is overwritten in place and cut to the new length after: emptying it
            # first (ftruncate 0) freed its blocks to allocate them again, and on ext4 a file
            # truncated to zero is written back at its rename (auto_da_alloc) — 15-36 µs per
            # model call more than this on this VM's disk (docs/performance.md, session 9).
            os.ftruncate(fd, len(data))
        info = os.fstat(fd)
        if stat.S_IMODE(info.st_mode) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)  # the umask took bits away; chmod leaves the signature
    except BaseException:
        os.close(fd)
        _unlink_quietly(temp)
        raise
    return StagedWrite(path, temp, fd, info)


_temp_names = itertools.count()
_temp_prefix: list[str] = []


def _open_temp(folder: str, name: str) -> tuple[str, int]:
    """A new temp file beside ``name``: ``.<name>.<random>.<n>.tmp``, created ``O_EXCL``;
    ``folder`` is empty (the current one) or ends with its separator.

    The random part is drawn once per process and a counter makes each name new, so a write
    costs no ``getrandom`` call; a name someone planted (``EEXIST``) gets a fresh draw."""
    for _ in range(8):
        if not _temp_prefix:
            _temp_prefix.append(secrets.token_hex(6))
        temp = f"{folder}.{name}.{_temp_prefix[0]}.{next(_temp_names)}.tmp"
        try:
            return temp, os.open(temp, _WRITE_FLAGS, FILE_MODE)
        except FileExistsError:
            _temp_prefix.clear()
    raise FileExistsError(errno.EEXIST, f"{folder or '.'}: could not create a fresh temp file")


def _open_spare(spare: str) -> int | None:
    """``spare`` opened for writing (not emptied: ``stage_write`` overwrites it and cuts it to
    the new length), or None when it cannot be reused."""
    try:
        fd = os.open(spare, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and info.st_uid == os.getuid():
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def commit_writes(writes: Sequence[StagedWrite]) -> list[BaseException | None]:
    """Make staged writes durable and visible: group commit, one outcome per write.

    The per-file sequence of ``write_atomic`` is kept — data durable before the rename, rename
    durable before success is reported — but the syncs are shared: one ``syncfs`` per file
    system flushes every temp file at once (per-file ``fsync`` where ``syncfs`` is unavailable
    or only one file is involved), and each directory is ``fsync``-ed once after all renames.
    A write that fails at any step loses its temp file and fails alone.

    The three steps are public too (``sync_staged``, ``publish_staged``, ``sync_renamed``), so
    a caller may run the two waits on a thread and the renames where it likes (``FileStore``'s
    owner writes rename on the event loop; see ``files.OwnerCommit``).
    """
    errors: list[BaseException | None] = [None] * len(writes)
    try:
        sync_staged(writes, errors)
    except BaseException as exc:
        errors[:] = [error or exc for error in errors]  # nothing unsynced may be renamed
        publish_staged(writes, errors)
        raise
    publish_staged(writes, errors)
    sync_renamed(writes, errors)
    return errors


def release_fd(write: StagedWrite) -> None:
    """Close a staged write's descriptor early (a sync reopens the temp file if it must):
    a thousand records staged at once must not hold a thousand descriptors."""
    if write.fd >= 0:
        os.close(write.fd)
        write.fd = -1


def _fsync_staged(write: StagedWrite) -> None:
    if write.fd >= 0:
        os.fsync(write.fd)
        return
    fd = os.open(write.temp, _READ_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_staged(writes: Sequence[StagedWrite], errors: list[BaseException | None]) -> None:
    """Step 1 (may block on the disk): make every staged temp file's data durable."""
    _sync_files(writes, errors)


def publish_staged(writes: Sequence[StagedWrite], errors: list[BaseException | None]) -> None:
    """Step 2 (fast): rename each synced temp file over its target, close every descriptor and
    drop the temp file of every write that failed. Call exactly once per staged batch."""
    try:
        for i, write in enumerate(writes):
            if errors[i] is None:
                try:  # (``_rename`` and ``release_fd`` in line: two Python calls a record less)
                    os.rename(write.temp, write.path)
                except Exception as exc:
                    errors[i] = exc
    finally:
        for write in writes:
            if write.fd >= 0:
                os.close(write.fd)
                write.fd = -1
        for i, write in enumerate(writes):
            if errors[i] is not None:
                _unlink_quietly(write.temp)


def sync_renamed(writes: Sequence[StagedWrite], errors: list[BaseException | None]) -> None:
    """Step 3 (may block on the disk): make the renames durable (one ``fsync`` per folder)."""
    _sync_dirs(writes, errors)


def _sync_files(writes: Sequence[StagedWrite], errors: list[BaseException | None]) -> None:
    by_device: dict[int, list[int]] = {}
    for i, write in enumerate(writes):
        by_device.setdefault(write.info.st_dev, []).append(i)
    syncfs = _syncfs()
    for indexes in by_device.values():
        open_fds = [writes[i].fd for i in indexes if writes[i].fd >= 0]
        if len(indexes) > 1 and syncfs is not None and open_fds:
            try:
                syncfs(open_fds[0])
                continue
            except OSError:
                pass  # find out which files are affected: fsync reports per file
        for i in indexes:
            try:
                _fsync_staged(writes[i])
            except OSError as exc:
                errors[i] = exc


def _sync_dirs(writes: Sequence[StagedWrite], errors: list[BaseException | None]) -> None:
    folders: dict[str, list[int]] = {}
    for i, write in enumerate(writes):
        if errors[i] is None:
            folders.setdefault(os.path.dirname(write.path), []).append(i)
    for folder, indexes in folders.items():
        try:
            fsync_dir(folder)
        except OSError as exc:
            for i in indexes:
                errors[i] = exc  # renamed but not known durable: report it, keep the file


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


MEMORY_FILE_SYSTEMS = frozenset({"tmpfs", "ramfs"})
"""File systems with no disk behind them: ``fsync`` there has nothing to wait for."""


def needs_sync(device: int) -> bool:
    """False when ``device`` (an ``st_dev``) is a RAM file system, where a sync is a no-op by
    definition (its files cannot outlive the machine's memory): callers may then skip the
    hand-off to a thread that only exists to wait for a disk. True wherever unsure."""
    kind = _file_system_kinds().get((os.major(device), os.minor(device)))
    return kind not in MEMORY_FILE_SYSTEMS


def file_system_kind(device: int) -> str | None:
    """The file system type (``ext4``, ``tmpfs``, ``nfs4``...) of ``device`` (an ``st_dev``),
    None when not known (mounted after the mount table was first read)."""
    return _file_system_kinds().get((os.major(device), os.minor(device)))


@functools.cache
def _file_system_kinds() -> dict[tuple[int, int], str]:
    """``(major, minor) -> file system type`` of every mount, from ``/proc/self/mountinfo``
    (read once; a folder mounted later counts as needing syncs)."""
    kinds: dict[tuple[int, int], str] = {}
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as mounts:
            for line in mounts:
                fields = line.split()
                if " - " not in line or len(fields) < 3:
                    continue
                major, _, minor = fields[2].partition(":")
                kind = line.split(" - ", 1)[1].split()[0]
                if major.isdigit() and minor.isdigit():
                    kinds[(int(major), int(minor))] = kind
    except OSError:
        return {}
    return kinds


def syncfs_once(fd: int) -> bool:
    """Flush the whole file system ``fd`` is on with one ``syncfs``; False where that is not
    available or failed (then the caller syncs file by file, which reports errors per file)."""
    syncfs = _syncfs()
    if syncfs is None:
        return False
    try:
        syncfs(fd)
    except OSError:
        return False
    return True


@functools.cache
def _syncfs() -> Callable[[int], None] | None:
    """``syncfs(2)`` from libc, or None where it is missing or cannot report write errors.

    Before Linux 5.8, ``syncfs`` returned success even when writeback failed, so there a
    per-file ``fsync`` is the only honest durability check.
    """
    if not sys.platform.startswith("linux") or _kernel_version() < (5, 8):
        return None
    import ctypes  # at the first sync, not at import (~1 % of a -p start-up)

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        raw = libc.syncfs
    except (OSError, AttributeError):
        return None
    raw.argtypes = [ctypes.c_int]
    raw.restype = ctypes.c_int

    def syncfs(fd: int) -> None:
        if raw(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"syncfs: {os.strerror(code)}")

    return syncfs


def _kernel_version() -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return (int(match[1]), int(match[2])) if match else (0, 0)


def _write_all(fd: int, data: bytes) -> None:
    # One write as a rule (a record is a few KB): no memoryview and slice per record unless a
    # write comes back short.
    written = os.write(fd, data)
    if written < len(data):
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]


def fsync_dir(path: str | Path) -> None:
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


def append_locked(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Append ``data`` under an exclusive ``flock`` on the file itself: writers in other
    processes (teammates appending to one mailbox or record file) never interleave. Only a
    regular file: a symlink, a FIFO or a device put in its place raises ``UnsafePathError``
    (opened without blocking, so a FIFO cannot hang the writer)."""
    import fcntl

    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # ENXIO: a FIFO nobody reads
            raise UnsafePathError(f"{path}: not a regular file; refusing to append") from exc
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePathError(f"{path}: not a regular file; refusing to append")
        fcntl.flock(fd, fcntl.LOCK_EX)
        _write_all(fd, data)
    finally:
        os.close(fd)
