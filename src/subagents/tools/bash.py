"""The Bash tool: run one shell command in the agent's directory, bounded in time and output.

Process lifetime is the point of this module. The shell runs in a new session, so it and
everything it starts (``sleep 1000 &`` included) form one process group whose id is the shell's
PID. The group is tracked in ``ctx.processes`` from spawn until the shell is reaped, and is killed
as a whole in every way the call can end:

* normal exit: members the shell left behind are killed, since once the group is discarded from
  the tracker nothing would ever stop them (background shells are a separate tool path);
* timeout: SIGTERM to the group, up to 2 s of grace, then SIGKILL;
* cancellation (the agent was aborted): SIGKILL at once, reap, then re-raise.

Where pidfds exist the shell is started by ``processes.start_piped`` (stdout and stderr on one
pipe) and waited for through its pidfd; the pipe is read by a reader callback on the loop. No
child-watcher thread, transport or pump task: about half of a call's CPU in this process
(docs/performance.md, session 14). The group is signalled only while the shell is unreaped
(``Piped.kill_group``), so a PID freed and taken by a stranger is never signalled. Elsewhere
``spawn_shell``: a ``process_waiter.WaitedProcess``, waited for by a thread without being
reaped, and signalled likewise only until our own reap (before, asyncio's subprocesses: their
child watcher reaped the shell at its exit, and the leftovers' SIGKILL then went to a PID no
longer the shell's). Background shells start theirs the same two ways
(``start_shell`` with their output file, ``agents/shells.py``).

Output is read from a pipe of our own rather than an asyncio subprocess pipe: asyncio's
``Process.wait()`` also waits for its pipes to close, which a grandchild holding stdout would
delay forever. Only what will be shown is kept (a head and a tail), so a command printing
gigabytes costs no memory.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from subagents.descriptors import open_pipe, process_slot, retry_on_emfile
from subagents.process_waiter import WaitedProcess, spawn_waited
from subagents.processes import (
    Piped,
    PipeReader,
    ProcessTracker,
    have_pidfds,
    open_pipe_reader,
    reap,
    reap_later,
    start_piped,
    wait_exited,
)
from subagents.tools import descriptions
from subagents.tools.base import (
    CallInfo,
    LazyInput,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
)
from subagents.tools.shell_timeouts import DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS

if TYPE_CHECKING:
    from subagents.tools.inputs.bash import BashInput

__all__ = ["DEFAULT_TIMEOUT_MS", "MAX_OUTPUT_CHARS", "MAX_TIMEOUT_MS", "BashTool"]

MAX_OUTPUT_CHARS = 30_000
_TAIL_CHARS = 10_000
_OMITTED_MARKER = "\n\n[... {omitted} characters of output omitted ...]\n\n"
_TERM_GRACE_S = 2.0
_LEFTOVER_GRACE_S = 0.1
_DRAIN_LIMIT_S = 2.0
_PROGRESS_INTERVAL_S = 1.0
_READ_CHUNK = 64 * 1024

ProgressFn = Callable[[dict[str, Any]], None]


class BashTool(Tool["BashInput"]):
    """Runs ``/bin/bash -c COMMAND`` in ``ctx.cwd`` with ``ctx.env`` overlaid on the environment."""

    name = "Bash"
    description = descriptions.BASH.format(
        default_timeout_ms=DEFAULT_TIMEOUT_MS,
        max_timeout_ms=MAX_TIMEOUT_MS,
        max_output_chars=MAX_OUTPUT_CHARS,
    )
    input_model = LazyInput["BashInput"]("subagents.tools.inputs.bash", "BashInput")

    def is_read_only(self, args: BashInput) -> bool:
        from subagents.tools.bash_readonly import is_read_only_command  # at the first check

        return is_read_only_command(args.command)

    def is_concurrency_safe(self, args: BashInput) -> bool:
        """Read-only commands may run side by side; anything else runs alone."""
        return self.is_read_only(args)

    async def call(self, args: BashInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        if args.run_in_background:
            return await _start_in_background(args, ctx)
        timeout_ms = args.timeout or DEFAULT_TIMEOUT_MS
        run = await run_command(args.command, ctx, timeout_ms=timeout_ms, progress=info.progress)
        return _to_output(args.command, run, timeout_ms)


async def _start_in_background(args: BashInput, ctx: ToolContext) -> ToolOutput:
    """The seam for background shells: a session service owns them, when there is one."""
    if ctx.services is None:
        raise ToolError("Background shells are not available in this context")
    return await ctx.services.start_background_shell(args.command, ctx, args.description)


@dataclass(kw_only=True)
class CommandOutput:
    """Output kept as it streams: the first ``limit`` chars and always the last ``tail_chars``."""

    limit: int = MAX_OUTPUT_CHARS
    tail_chars: int = _TAIL_CHARS
    total: int = 0
    _head: str = ""
    _tail: str = ""
    _decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )

    def feed(self, data: bytes, *, final: bool = False) -> None:
        text = self._decoder.decode(data, final)
        if not text:
            return
        self.total += len(text)
        room = self.limit - len(self._head)
        if room > 0:
            self._head += text[:room]
        self._tail = (self._tail + text)[-self.tail_chars :]

    def text(self) -> str:
        """Everything when it fits; else the head, a marker with the count omitted, the tail."""
        if self.total <= self.limit:
            return self._head
        keep = self.limit - self.tail_chars
        omitted = self.total - keep - self.tail_chars
        return self._head[:keep] + _OMITTED_MARKER.format(omitted=omitted) + self._tail

    def last_lines(self, count: int = 5) -> list[str]:
        return self._tail.splitlines()[-count:]


@dataclass(kw_only=True)
class CommandRun:
    """How a command ended: its output, its exit code (128+N for signal N), whether it timed out."""

    output: CommandOutput
    exit_code: int
    timed_out: bool


async def run_command(
    command: str, ctx: ToolContext, *, timeout_ms: int, progress: ProgressFn | None = None
) -> CommandRun:
    """Run ``command`` to its end (or its timeout); its process group never outlives the call.

    The call holds one of the session's process slots while it runs (``descriptors``): past
    the descriptor budget a command waits for a slot instead of failing with ``EMFILE``."""
    async with process_slot():
        if have_pidfds():
            return await _run_piped(command, ctx, timeout_ms=timeout_ms, progress=progress)
        return await _run_command(command, ctx, timeout_ms=timeout_ms, progress=progress)


async def _run_piped(
    command: str, ctx: ToolContext, *, timeout_ms: int, progress: ProgressFn | None
) -> CommandRun:
    """The shell through ``start_piped`` and its pidfd (see the module docstring)."""
    proc = await start_shell(command, ctx)
    output = CommandOutput()
    reader = PipeReader(_output_feed(output, command, progress))
    reaped = False
    timed_out = False
    status: int | None = None
    try:
        ctx.processes.add(proc.pid)  # inside: should recording the group fail, it is ended
        reader.read_from(proc.stdout)
        if not await _exits_within(proc, timeout_ms / 1000):
            timed_out = True
            proc.kill_group(signal.SIGTERM)  # so programs can clean up
            if not await _exits_within(proc, _TERM_GRACE_S):
                proc.kill_group()
                await wait_exited(proc.pidfd)
        # Let late writers flush, then stop whatever the shell left running (`cmd &`): before
        # the reap, while the shell's PID is still its group's id.
        await reader.ended(_LEFTOVER_GRACE_S)
        proc.kill_group()
        ctx.processes.discard(proc.pid)
        reaped = True
        with contextlib.suppress(ChildProcessError):  # reaped by code that waits for any child
            status = reap(proc.pidfd)
        # A process that escaped the group (setsid) may hold the pipe; stop reading then.
        await reader.ended(_DRAIN_LIMIT_S)
    except BaseException:
        end = asyncio.create_task(
            _end_piped(proc, reader, ctx.processes, reaped=reaped), name=f"bash-end:{proc.pid}"
        )
        _ENDING.add(end)
        end.add_done_callback(_ENDING.discard)
        await asyncio.shield(end)  # a second cancellation leaves it to finish (it closes all)
        raise
    reader.stop()
    proc.close()
    return CommandRun(output=output, exit_code=_exit_code(status), timed_out=timed_out)


_ENDING: set[asyncio.Task[None]] = set()
"""The ends of cancelled calls still running: a task the loop only holds weakly is kept here."""


async def _exits_within(proc: Piped, limit_s: float) -> bool:
    """Whether the shell exits within ``limit_s`` (it is not reaped)."""
    try:
        async with asyncio.timeout(limit_s):
            await wait_exited(proc.pidfd)
    except TimeoutError:
        return False
    return True


async def _end_piped(
    proc: Piped, reader: PipeReader, tracker: ProcessTracker, *, reaped: bool
) -> None:
    """A call that did not finish (cancelled, or an error): SIGKILL the group, reap the shell
    (bounded: one stuck in the kernel past the SIGKILL is left to ``reap_later``'s thread),
    stop reading, close every descriptor."""
    try:
        if not reaped:
            proc.kill_group()
            tracker.discard(proc.pid)  # the SIGKILL is sent; from the reap on it is no group
            if await _exits_within(proc, _DRAIN_LIMIT_S):
                with contextlib.suppress(ChildProcessError):
                    reap(proc.pidfd)
            else:
                reap_later(proc)
    finally:
        reader.stop()
        proc.close()


def _output_feed(
    output: CommandOutput, command: str, progress: ProgressFn | None
) -> Callable[[bytes], None]:
    """The shell pipe's ``PipeReader`` feed: each chunk into ``output`` (its decoder's last
    bytes flushed at the end, ``b""``), and the last lines reported at most once a second."""
    started = last_report = time.monotonic()

    def feed(chunk: bytes) -> None:
        nonlocal last_report
        if not chunk:
            output.feed(b"", final=True)
            return
        output.feed(chunk)
        if progress is not None:
            now = time.monotonic()
            if now - last_report >= _PROGRESS_INTERVAL_S:
                last_report = now
                progress(_progress_event(command, now - started, output))

    return feed


def _progress_event(command: str, elapsed_s: float, output: CommandOutput) -> dict[str, Any]:
    return {
        "type": "bash_progress",
        "command": command,
        "elapsed_ms": int(elapsed_s * 1000),
        "output_chars": output.total,
        "last_lines": output.last_lines(),
    }


async def _run_command(
    command: str, ctx: ToolContext, *, timeout_ms: int, progress: ProgressFn | None
) -> CommandRun:
    read_fd, write_fd = await open_pipe()
    try:
        proc = await spawn_shell(command, ctx, write_fd)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)  # the shell holds its own copy; ours would keep the pipe open forever
    ctx.processes.add(proc.pid)  # start_new_session: the shell leads a group of its own PID
    output = CommandOutput()
    transport: asyncio.BaseTransport | None = None
    pump: asyncio.Task[None] | None = None
    try:
        reader, transport = await open_pipe_reader(read_fd)
        pump = asyncio.create_task(
            _pump(reader, output, command, progress), name=f"bash-output-{proc.pid}"
        )
        timed_out = await _supervise(proc, ctx.processes, pump, timeout_ms / 1000)
    except BaseException:
        proc.kill_group(signal.SIGKILL)
        await _reap_quietly(proc, ctx.processes)
        raise
    finally:
        if pump is not None:
            pump.cancel()
        if transport is not None:
            transport.close()
    return CommandRun(output=output, exit_code=_exit_code(proc.returncode), timed_out=timed_out)


async def start_shell(command: str, ctx: ToolContext, out_fd: int | None = None) -> Piped:
    """``/bin/bash -c command`` as ``spawn_shell`` starts it, through ``start_piped`` (where
    pidfds exist): stdin closed, stdout and stderr on one pipe of ours — or on ``out_fd``, the
    caller's (a background shell's output file) — leading its own session and group. The
    spawn is retried on ``EMFILE``; ToolError when it cannot start."""
    argv = ("/bin/bash", "-c", command)
    # No overlay: the shell inherits this process's environment as it is (``os.environ``'s
    # changes are made with putenv, so it holds them) without the copy: 38 variables decoded,
    # merged and encoded again were ~660 of a call's ~1,030 Python calls (session 14).
    env = {**os.environ, **ctx.env} if ctx.env else None

    async def start() -> Piped:
        return start_piped(
            argv, cwd=ctx.cwd, env=env, with_input=False, merge_stderr=True, output=out_fd
        )

    try:
        return await retry_on_emfile(start)
    except OSError as exc:
        raise ToolError(f"Cannot start /bin/bash in working directory {ctx.cwd}: {exc}") from exc


async def spawn_shell(command: str, ctx: ToolContext, out_fd: int) -> WaitedProcess:
    """``/bin/bash -c command`` in the agent's folder and env, stdin closed, stdout and stderr
    to ``out_fd``, leading its own process group (so one ``killpg`` reaches all it starts),
    where there are no pidfds: waited for without being reaped (``process_waiter``), so its
    group is signalled only while its id is still the shell's."""

    async def start() -> WaitedProcess:
        return spawn_waited(
            ("/bin/bash", "-c", command),
            cwd=ctx.cwd,
            env={**os.environ, **ctx.env},
            stdout=out_fd,
            stderr=out_fd,
            new_session=True,
        )

    try:
        return await retry_on_emfile(start)
    except OSError as exc:
        raise ToolError(f"Cannot start /bin/bash in working directory {ctx.cwd}: {exc}") from exc


async def _supervise(
    proc: WaitedProcess,
    tracker: ProcessTracker,
    pump: asyncio.Task[None],
    limit_s: float,
) -> bool:
    """Wait for the shell within the limit, clear its group, reap it; True when it timed out."""
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.shield(proc.exited), limit_s)
    except TimeoutError:
        timed_out = True
        await _terminate(proc)
    # Let late writers flush, then stop whatever the shell left running (`cmd &`): before the
    # reap, while the shell's PID is still its group's id.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(pump), _LEFTOVER_GRACE_S)
    proc.kill_group(signal.SIGKILL)
    tracker.discard(proc.pid)
    proc.reap()
    with contextlib.suppress(TimeoutError):
        # A process that escaped the group (setsid) may hold the pipe; stop reading then.
        await asyncio.wait_for(pump, _DRAIN_LIMIT_S)
    return timed_out


async def _terminate(proc: WaitedProcess) -> None:
    """SIGTERM the group so programs can clean up; SIGKILL it if the shell outlasts the grace."""
    proc.kill_group(signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.shield(proc.exited), _TERM_GRACE_S)
    except TimeoutError:
        proc.kill_group(signal.SIGKILL)
        await asyncio.shield(proc.exited)


async def _reap_quietly(proc: WaitedProcess, tracker: ProcessTracker) -> None:
    """Reap a killed shell while unwinding a cancellation; bounded (one stuck past its SIGKILL
    is reaped by its waiter when it goes), and immune to a second cancellation."""
    tracker.discard(proc.pid)  # the SIGKILL is sent; from the reap on it is no group
    with contextlib.suppress(TimeoutError, asyncio.CancelledError):
        await asyncio.wait_for(asyncio.shield(proc.exited), _DRAIN_LIMIT_S)
    if proc.exited.done():
        proc.reap()
    else:
        proc.abandon()


async def _pump(
    reader: asyncio.StreamReader, output: CommandOutput, command: str, progress: ProgressFn | None
) -> None:
    """Copy the pipe into ``output``; report the last lines at most once a second."""
    started = last_report = time.monotonic()
    while chunk := await reader.read(_READ_CHUNK):
        output.feed(chunk)
        now = time.monotonic()
        if progress is not None and now - last_report >= _PROGRESS_INTERVAL_S:
            last_report = now
            progress(_progress_event(command, now - started, output))
    output.feed(b"", final=True)


def _exit_code(returncode: int | None) -> int:
    """The shell's convention: a death by signal N reads as 128+N."""
    if returncode is None:
        return -1
    return 128 - returncode if returncode < 0 else returncode


def _to_output(command: str, run: CommandRun, timeout_ms: int) -> ToolOutput:
    text = run.output.text().rstrip("\n")
    parts = [text] if text else []
    if run.timed_out:
        parts.append(f"Command timed out after {timeout_ms} ms")
    elif run.exit_code != 0:
        parts.append(f"Exit code {run.exit_code}")
    return ToolOutput(
        content="\n".join(parts) or "(no output)",
        is_error=run.timed_out or run.exit_code != 0,
        metadata={"exit_code": run.exit_code, "command": command, "timed_out": run.timed_out},
    )
