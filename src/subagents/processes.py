"""Tracking of the OS processes an agent started, so none outlives its owner.

Every shell a tool starts runs in its own process group (``start_new_session=True``), so one
``killpg`` reaches the shell and everything it spawned. A process is tracked from spawn until it
has been reaped; while it is unreaped its PID cannot be reused, so killing a tracked group never
hits a stranger.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from subagents.process_waiter import spawn_waited


class ProcessTracker:
    """The live process groups of one agent (or of the whole session, at the root)."""

    __slots__ = ("_groups", "on_add")

    def __init__(self, on_add: Callable[[int], None] | None = None) -> None:
        self._groups: set[int] | None = None
        """Made at the first group: every agent has a tracker, few start a process."""
        self.on_add = on_add
        """Called with each new group (a child records it on disk for crash recovery)."""

    def add(self, pgid: int) -> None:
        if self._groups is None:
            self._groups = set()
        self._groups.add(pgid)
        if self.on_add is not None:
            self.on_add(pgid)

    def discard(self, pgid: int) -> None:
        if self._groups is not None:
            self._groups.discard(pgid)

    @property
    def groups(self) -> frozenset[int]:
        return frozenset(self._groups or ())

    def kill_all(self, sig: int = signal.SIGKILL) -> list[int]:
        """Signal every tracked group; returns the groups signalled. Safe to call twice."""
        killed: list[int] = []
        for pgid in list(self._groups or ()):
            if kill_group(pgid, sig):
                killed.append(pgid)
        return killed


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` to a process group; False when it is already gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def open_pipe_reader(
    read_fd: int, *, limit: int = 2**16
) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    """An asyncio stream over our end of an output pipe (the fd is closed if this fails).

    A child's output goes to a pipe of our own rather than asyncio's ``PIPE``: asyncio's
    ``Process.wait()`` also waits for every pipe it made to close, so a grandchild holding
    stdout would keep ``wait()`` from returning after the child itself has exited."""
    pipe = os.fdopen(read_fd, "rb", 0)
    reader = asyncio.StreamReader(limit=limit)  # a line past ``limit``: readline's ValueError
    try:
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe
        )
    except BaseException:
        pipe.close()
        raise
    return reader, transport


RUN_TAG_VARIABLE = "SUBAGENTS_RUN_TAG"
"""Set in the environment of a process tree we must be able to end completely (hooks)."""

_PROC = "/proc"


def kill_tagged(tag: str, sig: int = signal.SIGKILL, *, passes: int = 3) -> list[int]:
    """Signal every process whose environment carries ``SUBAGENTS_RUN_TAG=<tag>``.

    A process group is not a process tree: a hook that runs ``setsid daemon &`` (or
    double-forks) puts the daemon in a session of its own, reparented to init, where no
    ``killpg`` reaches it. Its environment still holds the tag it inherited, and
    ``/proc/<pid>/environ`` shows it: so the tree is found by the tag, without cgroups and
    without making this process a subreaper (which would make it reap every orphan of every
    tool). A process that clears its environment (``env -i``) escapes; without ``/proc`` (not
    Linux) nothing is found and only the group kill applies. Repeated ``passes`` times, since a
    dying tree may still fork. Returns the PIDs signalled. Costs one read per process on the
    machine (2.4-3 µs each here, ~0.2-0.4 ms a scan of 85-128 processes: session 13)."""
    needle = f"{RUN_TAG_VARIABLE}={tag}".encode()
    me = os.getpid()
    killed: list[int] = []
    for _ in range(passes):
        found = [pid for pid in _pids() if pid != me and _has_tag(pid, needle)]
        if not found:
            break
        for pid in found:
            if _signal_if_tagged(pid, needle, sig):
                killed.append(pid)
    return killed


def _signal_if_tagged(pid: int, needle: bytes, sig: int) -> bool:
    """Signal ``pid`` if the process it names carries the tag when signalled. The tagged
    process seen may have exited since the look and a stranger taken its number: a pidfd
    pins whichever process has the number now, and the tag is looked at again after it was
    opened (a process that took the number later is not the pidfd's, and the signal to the
    pidfd's dead one fails). Without pidfds (not Linux 5.3+): a plain ``kill``."""
    if not have_pidfds():
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # gone
        return False
    try:
        if not _has_tag(pid, needle):
            return False
        signal.pidfd_send_signal(pidfd, sig)
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        os.close(pidfd)
    return True


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir(_PROC) if name.isdigit()]
    except OSError:
        return []


def _has_tag(pid: int, needle: bytes) -> bool:
    """Whether ``needle`` is one of the entries of the process's environment. Read with
    ``os.open``/``os.read``, not a buffered file object: this runs for every process on the
    machine after every hook, and the file object cost a third of it (~3.6 against ~2.4 µs
    a process, docs/performance.md, session 13)."""
    try:
        fd = os.open(f"{_PROC}/{pid}/environ", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # gone, or another user's
        return False
    try:
        data = os.read(fd, _ENVIRON_READ)
        # The kernel fills a read of environ until the environment ends, so a short read is
        # its end; only a full one needs more reads.
        if len(data) == _ENVIRON_READ:
            parts = [data]
            while chunk := os.read(fd, _ENVIRON_READ):
                parts.append(chunk)
            data = b"".join(parts)
    except OSError:  # exiting as we read
        return False
    finally:
        os.close(fd)
    # The substring test first: it rules out nearly every process without splitting.
    return needle in data and needle in data.split(b"\0")


_ENVIRON_READ = 65536


_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)
"""What ``subprocess`` restores to their defaults in a child (Python ignores them itself)."""
_pidfds: bool | None = None


def have_pidfds() -> bool:
    """Whether processes can be waited for through pidfds here (Linux 5.4+): the way of
    ``read_output`` and ``start_piped``; without them callers use asyncio's subprocesses."""
    global _pidfds
    if _pidfds is None:
        try:
            os.close(os.pidfd_open(os.getpid()))
            _pidfds = all(hasattr(os, name) for name in ("posix_spawnp", "pipe2", "P_PIDFD"))
        except (AttributeError, OSError):  # not Linux, or a kernel before 5.3
            _pidfds = False
    return _pidfds


async def read_output(
    argv: tuple[str, ...], env: Mapping[str, str], *, limit: int
) -> tuple[int | None, bytes]:
    """Run ``argv`` (searched on PATH) with stdin and stderr on ``/dev/null``: its exit status
    and what it wrote to stdout. Past ``limit`` bytes the process is killed and the status is
    None (the output is then the first ``limit`` bytes or a little more). The output ends at
    the process's exit: a process it started that holds the pipe open (``cmd &``) is not
    waited for. OSError when it cannot start.

    With ``posix_spawnp`` and a pidfd (Linux 5.4+) this process is not forked and no child
    watcher thread is started: ~0.23 ms of this process's CPU per short command against ~0.65
    through ``asyncio.create_subprocess_exec`` (docs/performance.md, session 12); elsewhere
    that is the way. The process is waited for through its pidfd, so a PID reused after some
    other code reaped it is never signalled or waited for. The caller's cancellation kills and
    reaps the process: none is left behind."""
    inherited = _inheritable_descriptors() if have_pidfds() else None
    if inherited is None:
        return await _read_output_asyncio(argv, env, limit)
    pid, pidfd, read_end = _spawn(argv, env, inherited)
    return await _collect(pid, pidfd, read_end, limit)


def _inheritable_descriptors() -> list[int] | None:
    """This process's descriptors past stderr that an exec would pass on (None: unknown, no
    ``/proc``). ``posix_spawn`` has no ``close_fds``: these are closed in the child by name.
    Python makes its own descriptors non-inheritable, so this is mostly empty; one held
    inheritable (passed by this process's parent, a library's) would otherwise be kept by the
    command and any daemon it starts. (One made inheritable by another thread between this
    listing and the spawn is passed on: best effort there; a listed one closed meanwhile is
    no error, glibc ignores EBADF of a close action.)"""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return None
    found: list[int] = []
    for name in names:
        fd = int(name)
        if fd > 2:
            try:
                if os.get_inheritable(fd):
                    found.append(fd)
            except OSError:  # the listing's own descriptor, closed by now
                continue
    return found


def _spawn(
    argv: tuple[str, ...], env: Mapping[str, str], inherited: list[int]
) -> tuple[int, int, int]:
    """Start ``argv`` in a process group of its own, its stdout on a pipe and ``inherited``
    closed: (its PID, its pidfd, our end of the pipe)."""
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    try:
        devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            pid = os.posix_spawnp(
                argv[0],
                argv,
                env,
                file_actions=(
                    (os.POSIX_SPAWN_DUP2, devnull, 0),
                    (os.POSIX_SPAWN_DUP2, write_end, 1),
                    (os.POSIX_SPAWN_DUP2, devnull, 2),
                    *[(os.POSIX_SPAWN_CLOSE, fd) for fd in inherited],
                ),
                setsigdef=_DEFAULT_SIGNALS,
                setpgroup=0,  # its group: what it starts is killed with it (kill_pinned_group)
            )
        finally:
            os.close(devnull)
            os.close(write_end)
    except BaseException:
        os.close(read_end)
        raise
    try:
        return pid, os.pidfd_open(pid), read_end
    except BaseException:  # out of descriptors: nothing has reaped it yet, so the PID is ours
        os.close(read_end)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)  # immediate after a SIGKILL
        raise


async def _collect(pid: int, pidfd: int, read_end: int, limit: int) -> tuple[int | None, bytes]:
    """Read the output to the process's exit (or past ``limit``), then reap it through its
    pidfd; it is killed (its group with it) and reaped whatever happens to the caller. Closes
    both descriptors."""
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()
    reaped = False

    def gone() -> None:
        loop.remove_reader(pidfd)
        if not exited.done():
            exited.set_result(None)

    try:
        loop.add_reader(pidfd, gone)
        cut, chunks = await _read_until_exit(read_end, exited, limit)
        if cut:
            kill_pinned_group(pid, pidfd)
        await exited
        code = reap(pidfd)
        reaped = True
        return (None if cut else code), b"".join(chunks)
    finally:
        os.close(read_end)
        loop.remove_reader(pidfd)
        if not reaped:
            kill_pinned_group(pid, pidfd)
            kill_and_reap(pidfd)
        os.close(pidfd)


async def _read_until_exit(
    read_end: int, exited: asyncio.Future[Any], limit: int
) -> tuple[bool, list[bytes]]:
    """What the process writes to ``read_end`` until the pipe's end, or past ``limit`` bytes
    (then True: cut), or until it has exited (``exited`` done): then what the pipe holds. A
    process it started may hold the pipe open long after it exited (``cmd &``, a daemon
    such as git's fsmonitor): its writes after the exit are not waited for. The process's own
    writes are all in the pipe by the time it has exited."""
    loop = asyncio.get_running_loop()
    chunks: list[bytes] = []
    size = 0
    done: asyncio.Future[bool] = loop.create_future()

    def finish(cut: bool) -> None:
        loop.remove_reader(read_end)
        if not done.done():
            done.set_result(cut)

    def read_some() -> bool:
        """One read; True while there may be more to take now."""
        nonlocal size
        try:
            data = os.read(read_end, 65536)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if data:
            chunks.append(data)
            size += len(data)
            if size <= limit:
                return True
        finish(bool(data))
        return False

    def on_exit(_: object) -> None:
        # Scheduled when the process exited, which may be after the pipe's end finished the
        # read and the caller closed ``read_end`` — whose number a new pipe may have taken.
        if done.done():
            return
        while read_some():
            pass
        finish(False)

    os.set_blocking(read_end, False)
    loop.add_reader(read_end, read_some)
    exited.add_done_callback(on_exit)
    try:
        return await done, chunks
    finally:
        exited.remove_done_callback(on_exit)
        loop.remove_reader(read_end)


def reap(pidfd: int) -> int:
    """The status of an exited process, reaping it (its pidfd was readable: ``wait_exited``
    has returned, so this does not wait): its exit code, or minus the signal that ended it."""
    result = os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOHANG)
    if result is None:  # not reached: the pidfd said it had exited
        raise ChildProcessError("the process has not exited")
    return result.si_status if result.si_code == os.CLD_EXITED else -result.si_status


def kill_pinned_group(pid: int, pidfd: int, sig: int = signal.SIGKILL) -> None:
    """SIGKILL (or ``sig``) the process's group (``_spawn`` made it its own): the process and
    what it started and left in it (git's hooks, a ``core.fsmonitor`` command), which would
    otherwise run on after it. The group's ID is the process's PID, not reused while the
    process is unreaped — which ``waitid(..., WNOWAIT)`` on its pidfd checks first
    (ChildProcessError: some other code reaped it, and a stranger may have the number now: its
    own pidfd signal alone, which cannot reach a stranger). The process itself also gets a
    SIGKILL through its pidfd (should it have left its group); another signal only when the
    group's was not sent (a second SIGTERM would run a shell's trap twice)."""
    grouped = False
    try:
        os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        os.killpg(pid, sig)
        grouped = True
    except (ChildProcessError, ProcessLookupError, PermissionError):
        pass
    if grouped and sig != signal.SIGKILL:
        return
    try:
        signal.pidfd_send_signal(pidfd, sig)
    except ProcessLookupError:  # reaped already (by other code)
        pass


def kill_and_reap(pidfd: int) -> None:
    """SIGKILL the process behind ``pidfd`` (if it is still running) and reap it. Blocks
    until it is gone: immediate after a SIGKILL, unless it is stuck in the kernel."""
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:  # it had exited already
        pass
    try:
        os.waitid(os.P_PIDFD, pidfd, os.WEXITED)
    except ChildProcessError:  # reaped by a child watcher that waits for every child
        pass


async def _read_output_asyncio(
    argv: tuple[str, ...], env: Mapping[str, str], limit: int
) -> tuple[int | None, bytes]:
    """``read_output`` where there are no pidfds: the process waited for by a thread without
    being reaped (``process_waiter``), so its kill can never reach a PID it freed."""
    read_end, write_end = os.pipe()
    try:
        proc = spawn_waited(
            argv,
            cwd=None,
            env=dict(env),
            stdout=write_end,
            stderr=subprocess.DEVNULL,
            new_session=False,
        )
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    try:
        cut, chunks = await _read_until_exit(read_end, proc.exited, limit)
        if cut:
            proc.kill()
        await asyncio.shield(proc.exited)
        code = proc.reap()
    except BaseException:
        proc.kill()
        await asyncio.shield(proc.exited)  # immediate after a SIGKILL
        proc.reap()
        raise
    finally:
        os.close(read_end)
    return (None if cut else code), b"".join(chunks)


class Piped:
    """A process ``start_piped`` started: its PID, a pidfd on it, and our non-blocking ends of
    its stdin, stdout and stderr pipes (-1 once closed). ``close`` closes what is still open,
    once: its owner calls it when done, whatever happened."""

    __slots__ = ("pid", "pidfd", "stderr", "stdin", "stdout")

    def __init__(self, pid: int, pidfd: int, stdin: int, stdout: int, stderr: int) -> None:
        self.pid = pid
        self.pidfd = pidfd
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        """SIGKILL (or ``sig``) the process's group (``start_piped`` made it its own), through
        ``kill_pinned_group``: only while the process is unreaped, so its PID is still its
        group's and no stranger that took a freed number is signalled."""
        kill_pinned_group(self.pid, self.pidfd, sig)

    def close_stdin(self) -> None:
        """The end of the input (the process reads EOF once it has read what was written)."""
        if self.stdin >= 0:
            fd, self.stdin = self.stdin, -1
            os.close(fd)

    def close(self) -> None:
        """Close every descriptor still open: stdin, the output pipes, the pidfd (if the
        process is unreaped, that leaves it to be reaped by no one: reap it first)."""
        self.close_stdin()
        fds = (self.stdout, self.stderr, self.pidfd)
        self.stdout = self.stderr = self.pidfd = -1
        for fd in fds:
            if fd >= 0:
                os.close(fd)


def start_piped(
    argv: tuple[str, ...],
    *,
    cwd: Path | None,
    env: Mapping[str, str] | None,
    with_input: bool = True,
    merge_stderr: bool = False,
    output: int | None = None,
) -> Piped:
    """Start ``argv`` in ``cwd`` with ``env`` (None: this process's), in a session (and
    process group) of its own, its three standard streams on pipes of ours — stdin on
    ``/dev/null`` instead unless ``with_input`` (``Piped.stdin`` is then -1), stderr on the
    stdout pipe if ``merge_stderr`` (one pipe, the order of the writes kept; ``Piped.stderr``
    is then -1), stdout on the caller's descriptor ``output`` instead of a pipe if given
    (``Piped.stdout`` is then -1; the caller keeps and closes its own). OSError when it cannot
    start (a missing cwd or program; nothing is left running then).

    ``subprocess.Popen`` makes the process, with exactly the arguments asyncio's
    ``create_subprocess_exec`` gives it (``close_fds``: no descriptor of this process but the
    three pipes reaches it, inheritable or not; ``restore_signals``: SIGPIPE and SIGXFSZ at
    their defaults; ``start_new_session``), and ``vfork`` (no copy of this process) — but
    none of asyncio's machinery around it: no child-watcher thread, no transports (docs/
    performance.md, session 13). From here the pidfd owns the process: it is waited for and
    reaped only through it (``wait_exited``, ``reap``, ``kill_and_reap``), and its group is
    signalled (``Piped.kill_group``) only before that reap, while its PID is still its own and
    its group's: no PID some other code freed is ever signalled or waited for."""
    ours: list[int] = []  # our ends, closed if the start fails
    theirs: list[int] = []  # the child's ends, closed once it holds its copies
    try:
        for stream in range(3):  # stdin: the child reads; stdout, stderr: it writes
            if stream == 0 and not with_input:
                ours.append(-1)
                theirs.append(subprocess.DEVNULL)
                continue
            if stream == 2 and merge_stderr:
                ours.append(-1)
                theirs.append(subprocess.STDOUT)
                continue
            if stream == 1 and output is not None:
                ours.append(-1)
                theirs.append(output)
                continue
            read_end, write_end = os.pipe2(os.O_CLOEXEC)
            child_reads = stream == 0
            ours.append(write_end if child_reads else read_end)
            theirs.append(read_end if child_reads else write_end)
        popen = subprocess.Popen(
            argv,
            stdin=theirs[0],
            stdout=theirs[1],
            stderr=theirs[2],
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        # Disarm the Popen object: with a returncode of None, its __del__ (and every later
        # Popen's cleanup of dropped ones) would waitpid() the process behind our pidfd.
        popen.returncode = 0
        try:
            pidfd = os.pidfd_open(popen.pid)
        except BaseException:  # out of descriptors: nothing has reaped it, so the PID is ours
            os.kill(popen.pid, signal.SIGKILL)
            os.waitpid(popen.pid, 0)  # immediate after a SIGKILL
            raise
    except BaseException:
        for fd in ours:
            if fd >= 0:
                os.close(fd)
        raise
    finally:
        for fd in theirs:
            # Not DEVNULL (-3) nor STDOUT (-2), which are no descriptors, nor the caller's.
            if fd >= 0 and fd != output:
                os.close(fd)
    for fd in ours:
        if fd >= 0:
            os.set_blocking(fd, False)
    return Piped(popen.pid, pidfd, ours[0], ours[1], ours[2])


async def feed(proc: Piped, data: bytes) -> None:
    """Write ``data`` to the process's stdin, then close it (also when this fails or is
    cancelled). A process that exits or closes its stdin without reading it all ends the
    write: not an error. One that holds its stdin without reading keeps this waiting."""
    try:
        await write_all(proc.stdin, data)
    finally:
        proc.close_stdin()


async def write_all(fd: int, data: bytes) -> None:
    """Write ``data`` to the non-blocking pipe ``fd`` as it takes it; a reader that closed it
    ends the write (not an error)."""
    loop = asyncio.get_running_loop()
    view = memoryview(data)
    try:
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                await _ready(loop, fd, writing=True)
    except BrokenPipeError:
        pass


class PipeReader:
    """Reads one non-blocking pipe on the running loop as it becomes readable — a reader
    callback, not a task: most output is nothing, then its end — handing each chunk read to
    ``feed``, and ``b""`` once when reading ends (every writer closed the pipe, or ``stop``).
    The one reader of the Bash tool's pipe, a hook's two and ripgrep's two."""

    __slots__ = ("_fd", "_loop", "done", "feed")

    def __init__(self, feed: Callable[[bytes], None]) -> None:
        self.feed = feed
        self._fd = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self.done: asyncio.Future[None] | None = None
        """Done when every writer has closed the pipe (or the read was stopped)."""

    def read_from(self, fd: int) -> asyncio.Future[None]:
        """Read ``fd`` until every writer has closed it or ``stop``; the caller closes ``fd``
        after that."""
        self._loop = loop = asyncio.get_running_loop()
        self._fd = fd
        self.done = loop.create_future()
        loop.add_reader(fd, self._readable)
        return self.done

    async def ended(self, within_s: float) -> None:
        """Until the pipe's end, for at most ``within_s``."""
        if self.done is not None and not self.done.done():
            await asyncio.wait((self.done,), timeout=within_s)

    def stop(self) -> None:
        """No more reading (safe to call twice): ``feed`` gets its ``b""``, ``done`` is done."""
        if self._loop is not None and self._fd >= 0:
            self._loop.remove_reader(self._fd)
            self._fd = -1
            self.feed(b"")
        if self.done is not None and not self.done.done():
            self.done.set_result(None)

    def _readable(self) -> None:
        try:
            chunk = os.read(self._fd, 65536)
        except BlockingIOError:
            return
        except OSError:  # as the end of the pipe
            chunk = b""
        if not chunk:
            self.stop()
            return
        self.feed(chunk)


class CappedOutput:
    """What was read of one output pipe: its first ``limit`` bytes, and how many more were
    read and dropped (the writer never blocks on a full pipe; memory stays at ``limit``).
    Kept as it is read (``feed``, a ``PipeReader``'s), so a read stopped half-way leaves what
    it had."""

    __slots__ = ("dropped", "kept", "limit", "on_full")

    def __init__(self, limit: int, *, on_full: Callable[[], None] | None = None) -> None:
        self.limit = limit
        self.on_full = on_full
        """Called once, when ``limit`` bytes have been kept (e.g. to stop the writer)."""
        self.kept = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self.limit - len(self.kept)
        if room > 0 and chunk:
            self.kept += chunk[:room]
            if len(self.kept) >= self.limit and self.on_full is not None:
                self.on_full()
        self.dropped += max(0, len(chunk) - max(room, 0))


async def wait_exited(pidfd: int) -> None:
    """Until the process behind ``pidfd`` has exited. It is not reaped (``reap`` does that):
    until then its PID, and its process group's, cannot be reused."""
    await _ready(asyncio.get_running_loop(), pidfd, writing=False)


def reap_later(proc: Piped) -> None:
    """Hand an unreaped process's pidfd to a daemon thread that kills and reaps it and closes
    the pidfd (``proc.pidfd`` is -1 after): for one stuck in the kernel past its SIGKILL (a
    thread of the loop's executor would hold up the loop's shutdown while it waits)."""
    pidfd, proc.pidfd = proc.pidfd, -1

    def run() -> None:
        try:
            kill_and_reap(pidfd)
        finally:
            os.close(pidfd)

    threading.Thread(target=run, name=f"reap:{proc.pid}", daemon=True).start()


async def _ready(loop: asyncio.AbstractEventLoop, fd: int, *, writing: bool) -> None:
    """Until ``fd`` is readable (or writable): one wake-up of the loop's selector."""
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    add, remove = (
        (loop.add_writer, loop.remove_writer) if writing else (loop.add_reader, loop.remove_reader)
    )
    add(fd, wake)
    try:
        await ready
    finally:
        remove(fd)
