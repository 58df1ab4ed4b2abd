"""Child processes where there are no pidfds: waited for without being reaped, reaped by us.

The fallback used to be asyncio's subprocesses, whose child watcher reaps a process in a
thread of its own the moment it exits. From then its PID, which is also its process group's
id, is free; and the owner signals the group after the exit (the members a shell left behind,
``cmd &``; a kill racing the exit), by that bare number: a stranger that took it could be hit.

Here a thread waits with ``waitid(P_PID, pid, WEXITED | WNOWAIT)``, which returns at the exit
and leaves the process a zombie: its PID, and so its group's id, stays its own until the owner
calls ``reap``, and ``kill_group`` (or ``kill``) after that signals nothing — the guarantee the
pidfd path gives (``processes.Piped.kill_group``). A process some other code reaped (a child
watcher that waits for any child) is never signalled again either: the waiter sees
``ChildProcessError``.

Where there is no ``waitid`` (macOS: CPython leaves it out there) the thread reaps with
``waitpid`` and the owner learns of it only once that has returned: nothing is signalled from
then, but in the microseconds between the kernel's reap and the flag a signal could still go
by the bare number (a stranger could hold it only if the PID space wrapped round meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

WAITS_UNREAPED = hasattr(os, "waitid") and hasattr(os, "WNOWAIT")
"""Whether an exit can be waited for without reaping (module docstring)."""


class WaitedProcess:
    """A child started by ``spawn_waited``: ``exited`` is done once it has exited (unreaped
    where ``WAITS_UNREAPED``); ``reap`` then takes its status, once."""

    __slots__ = ("_abandoned", "_gone", "_lock", "exited", "pid", "reaped", "returncode")

    def __init__(self, pid: int, exited: asyncio.Future[object]) -> None:
        self.pid = pid
        self.exited = exited
        self.returncode: int | None = None
        """Once it has exited (``exited`` done): the exit code, or minus the signal that ended
        it (None: unknown, other code reaped it)."""
        self.reaped = False
        """Reaped (by ``reap``, the waiter, or other code): its number may be a stranger's."""
        self._abandoned = False
        self._gone = False
        """Set by the waiter once the process has exited."""
        self._lock = threading.Lock()

    def kill_group(self, sig: int = signal.SIGKILL) -> bool:
        """Signal the process's group (it leads one: ``new_session``) while it is unreaped;
        False when that is no longer so, or the group is gone."""
        return self._signal(os.killpg, sig)

    def kill(self, sig: int = signal.SIGKILL) -> bool:
        """Signal the process alone while it is unreaped; False when it is not."""
        return self._signal(os.kill, sig)

    def _signal(self, send: Callable[[int, int], None], sig: int) -> bool:
        with self._lock:  # a reap takes it too: no signal can follow one
            if self.reaped:
                return False
            try:
                send(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                return False
            return True

    def reap(self) -> int | None:
        """Reap the process if it has exited (``exited`` is done: this does not wait) and
        return ``returncode``; nothing more once it is reaped."""
        with self._lock:
            if not self.reaped:
                try:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:  # reaped by other code
                    self.reaped = True
                    return None
                if pid == 0:  # still running: not reaped, still ours to signal
                    return None
                self.reaped = True
                self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode

    def abandon(self) -> None:
        """The owner will not wait for it (it outlived its SIGKILL's grace): it is reaped as
        soon as it exits, by the waiter, so it is never left a zombie."""
        with self._lock:
            self._abandoned = True
            gone = self._gone
        if gone:
            self.reap()

    def _wait(self, loop: asyncio.AbstractEventLoop) -> None:
        """In the waiter thread: until the process has exited."""
        try:
            if WAITS_UNREAPED:
                found = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
                if found is not None:  # its status, read without taking it
                    code = found.si_status
                    self.returncode = code if found.si_code == os.CLD_EXITED else -code
            else:
                _, status = os.waitpid(self.pid, 0)
                with self._lock:
                    self.reaped = True
                    self.returncode = os.waitstatus_to_exitcode(status)
        except ChildProcessError:
            with self._lock:
                self.reaped = True
        with self._lock:  # with ``abandon``'s: one of the two sees the other
            self._gone = True
            abandoned = self._abandoned
        if abandoned:
            self.reap()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            loop.call_soon_threadsafe(self._exit)

    def _exit(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


def spawn_waited(
    argv: tuple[str, ...],
    *,
    cwd: Path | None,
    env: Mapping[str, str] | None,
    stdout: int,
    stderr: int,
    new_session: bool,
    stdin: int = subprocess.DEVNULL,
) -> WaitedProcess:
    """Start ``argv`` as asyncio's ``create_subprocess_exec`` would (``subprocess.Popen``:
    no descriptor but the three given passed on, stdin on ``/dev/null`` unless given, SIGPIPE
    and SIGXFSZ at their defaults), in a session and group of its own if ``new_session``, and a
    daemon thread waiting for its exit. OSError when it cannot start."""
    popen = subprocess.Popen(
        argv,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        cwd=cwd,
        env=env,
        start_new_session=new_session,
    )
    # Disarm the Popen object: with a returncode of None, its __del__ (and every later Popen's
    # cleanup of dropped ones) would waitpid() the process behind our back.
    popen.returncode = 0
    loop = asyncio.get_running_loop()
    process = WaitedProcess(popen.pid, loop.create_future())
    waiter = threading.Thread(
        target=process._wait, args=(loop,), name=f"subagents-wait-{popen.pid}", daemon=True
    )
    waiter.start()
    return process
