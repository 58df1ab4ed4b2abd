"""Opening a path in one system call that follows no symbolic link (Linux ``openat2``).

``confined`` opens a file tool's path one component at a time with ``O_NOFOLLOW`` so that no
link swapped in can lead it outside its root: a descriptor per folder, an ``open`` and a
``close`` each (13 system calls for ``src/pkg/mod/file.py``, ~16 µs). ``openat2`` with
``RESOLVE_NO_SYMLINKS`` gives the kernel the same rule for the whole path in one call: it
walks every component itself and fails with ``ELOOP`` at the first symbolic link, whatever is
swapped in meanwhile. So a path that names no link is opened whole (~9 µs with the ``lstat``
before it), and anything else takes the walk as before.

Python has no ``os.openat2``; it is called through ``ctypes``, and only once something else
has loaded ``ctypes`` in this process (``store.atomic``'s ``syncfs`` does at the first durable
write on a disk): loading it costs ~2-2.7 ms (8 M instructions), which ~300-400 Reads pay
back, so it is never loaded for this alone — a short session on tmpfs, where nothing syncs,
walks. Where the call is missing (a kernel before 5.6, another architecture, a seccomp filter
that refuses it) the first attempt says so and every later open takes the walk.

Without ``ctypes`` (or ``openat2``), a path is opened whole and then checked
(``open_then_check``): ``open`` with ``O_NOFOLLOW`` (the last name is no link), then
``readlink("/proc/self/fd/N")`` — the path the kernel finds for the opened file now. A name on
the way that is a link leads the open elsewhere, and the file opened then has another path;
that open is closed unread and reported as ``ELOOP``, as ``openat2`` reports it (the caller
resolves the path and walks). Equal paths mean the file the descriptor holds is, now, the one
the text names with no link on the way: below the root the text is below. 6 system calls
against the walk's 12 (~11.5 against ~15.5 µs, ``openat2`` ~9.3); where ``/proc`` cannot say
(not mounted), the first attempt says so and the walk serves from then on.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
from collections.abc import Callable

RESOLVE_NO_SYMLINKS = 0x04
_SYSCALL_NUMBERS = {"x86_64": 437, "aarch64": 437, "arm64": 437}
_UNSUPPORTED = frozenset({errno.ENOSYS, errno.EPERM, errno.EINVAL, errno.E2BIG})
"""What a kernel or a seccomp filter answers when it does not offer ``openat2``: never a fact
about the path (the walk then finds out what that is)."""

_AT_FDCWD = -100
_ENCODING, _ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()

Opener = Callable[[bytes, int], int]


def open_no_symlinks(path: str, flags: int) -> int | None:
    """A descriptor of the absolute ``path`` opened with ``flags`` when no component of it is
    a symbolic link; None where ``openat2`` is not available (use the walk). Raises
    ``OSError`` as ``open`` does; ``ELOOP`` means a component is (or became) a link."""
    opener = _opener()
    if opener is None:
        return None
    fd = opener(path.encode(_ENCODING, _ERRORS), flags)  # ``os.fsencode``, without its call
    if fd >= 0:
        return fd
    import ctypes  # imported by ``_opener`` already: this is a dictionary look-up

    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        _disable()
        return None
    raise OSError(code, os.strerror(code), path)


_disabled = False
"""Set to take the walk for every path (tests do: the walk is what every other way falls
back to)."""
_openat2_refused = False
"""Set once ``openat2`` was refused: later opens do not ask again."""
_proc_refused = False
"""Set once ``/proc/self/fd`` could not name an open file: ``open_then_check`` is not tried
again."""


def _disable() -> None:
    global _openat2_refused
    _openat2_refused = True


def ready() -> bool:
    """Whether ``open_no_symlinks`` may open at all now (ask before any work for it)."""
    return not _disabled and not _openat2_refused and "ctypes" in sys.modules


def whole_opener(flags: int) -> Callable[[str, int], int | None] | None:
    """How to open a whole path with ``flags`` that must hold no link now:
    ``open_no_symlinks`` where ``ctypes`` is loaded already, else ``open_then_check`` for a
    read-only open (one that writes nothing at the open: the file it reaches may be the wrong
    one until checked); None: take the walk."""
    if _disabled:
        return None
    if not _openat2_refused and "ctypes" in sys.modules:  # never loaded for this alone
        return open_no_symlinks
    if _proc_refused or flags & (os.O_ACCMODE | os.O_TRUNC | os.O_CREAT) != os.O_RDONLY:
        return None
    return open_then_check


def open_then_check(path: str, flags: int) -> int | None:
    """A descriptor of the absolute ``path`` (no ``..``, no empty or ``.`` name) opened with
    read-only ``flags`` (which hold ``O_NOFOLLOW``) when the opened file's path is ``path`` itself;
    ``OSError(ELOOP)`` (closed unread) when it is another (a link on the way); None where
    ``/proc`` cannot say (use the walk)."""
    fd = os.open(path, flags)
    try:
        found = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        os.close(fd)
        global _proc_refused
        _proc_refused = True
        return None
    if found != path:
        os.close(fd)
        raise OSError(errno.ELOOP, "a symbolic link on the way", path)
    return fd


def _opener() -> Opener | None:
    return _make_opener() if ready() else None


@functools.cache
def _make_opener() -> Opener | None:
    number = _SYSCALL_NUMBERS.get(os.uname().machine)
    if not sys.platform.startswith("linux") or number is None:
        return None
    import ctypes  # already loaded (``_opener``): a look-up in ``sys.modules``

    class OpenHow(ctypes.Structure):
        _fields_ = [
            ("flags", ctypes.c_uint64),
            ("mode", ctypes.c_uint64),
            ("resolve", ctypes.c_uint64),
        ]

    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    syscall.restype = ctypes.c_long
    syscall.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p]
    syscall.argtypes += [ctypes.c_size_t]
    size = ctypes.sizeof(OpenHow)
    hows: dict[int, tuple[OpenHow, object]] = {}

    def opener(path: bytes, flags: int) -> int:
        found = hows.get(flags)
        if found is None:
            how = OpenHow(flags, 0, RESOLVE_NO_SYMLINKS)
            found = hows[flags] = (how, ctypes.byref(how))
        return int(syscall(number, _AT_FDCWD, path, found[1], size))

    return opener
