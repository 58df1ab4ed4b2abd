"""Running command hooks: one ``/bin/sh -c`` process per hook, JSON on stdin, bounded in time.

Environment. A hook gets a *clean* environment, not the runtime's: only ``PATH``, ``HOME``,
``LANG``, ``LC_*``, ``TERM``, ``SHELL``, ``USER`` and ``TMPDIR`` are copied from the parent, plus
``CLAUDE_PROJECT_DIR`` (the name Claude Code hooks already use) and ``SUBAGENTS_PROJECT_DIR``, both
the project directory, and — when telemetry is on — ``TRACEPARENT``/``TRACESTATE`` of the span
that fired the hook (``observe.trace_env``). API keys and other secrets of the session therefore
never reach a hook script, which is often a third-party file checked into a repository.

Processes. The shell is started by ``processes.start_piped`` (``subprocess.Popen`` with
``close_fds``, so no descriptor of ours reaches it; its stdin, stdout and stderr on pipes of
ours) and waited for through a pidfd, without asyncio's child watcher and transports (a
third of a hook run's CPU in this process, docs/performance.md session 13); where there are
no pidfds it is asyncio's subprocesses, as before. Each hook runs in its own session
(``start_new_session=True``), so its process group holds the shell and everything it
spawned, and its environment carries a run tag
(``SUBAGENTS_RUN_TAG``, ``processes.kill_tagged``) that every descendant inherits, a daemon
that left the group with ``setsid`` included. When the shell exits, times out, or its caller is
cancelled, the group is killed with SIGKILL and so is every process found with the tag in
``/proc/<pid>/environ``; the shell is reaped before the call returns (or re-raises), so no hook
outlives the event that started it (a process that clears its whole environment escapes the
tag; see docs/hooks-and-permissions.md). While it runs, the group is also registered in the
caller's ``ProcessTracker`` so an agent's final cleanup reaches it too. A hook is done when its
shell exits: a background job it left holding stdout is ended then, not waited for.

Output. At most ``MAX_OUTPUT_BYTES`` (4 MiB) of stdout and of stderr are kept; the rest is read
and dropped (so the hook never blocks on a full pipe) and a note says how much was dropped
(JSON output cut that way no longer parses, and is handled as unreadable output).

The hooks of one event run concurrently, as Claude Code runs them; results come back in config
order so aggregation is deterministic.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from subagents.descriptors import open_pipe, process_slot, retry_on_emfile
from subagents.hooks.config import HookCommand
from subagents.observe import trace_env
from subagents.process_waiter import WaitedProcess, spawn_waited
from subagents.processes import (
    RUN_TAG_VARIABLE,
    CappedOutput,
    Piped,
    PipeReader,
    ProcessTracker,
    feed,
    have_pidfds,
    kill_tagged,
    open_pipe_reader,
    reap,
    reap_later,
    start_piped,
    wait_exited,
    write_all,
)

PASSED_ENV_VARS: Final = ("PATH", "HOME", "LANG", "TERM", "SHELL", "USER", "TMPDIR")
"""Variables copied from the runtime's environment into a hook's (plus every ``LC_*``)."""

_REAP_TIMEOUT_S: Final = 5.0
MAX_OUTPUT_BYTES: Final = 4 * 1024 * 1024
"""At most this much of a hook's stdout (and of its stderr) is kept; the rest is counted."""


@dataclass(kw_only=True, slots=True)
class HookRun:
    """What one hook process did. ``exit_code`` is None when it never finished normally."""

    command: HookCommand
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str = ""
    """Why the process could not be started (a missing cwd, no ``/bin/sh``)."""
    pid: int | None = None


def clean_environment(project_dir: Path, parent: Mapping[str, str]) -> dict[str, str]:
    """The environment of every hook process: the whitelist above plus the project dir."""
    env = {
        name: value
        for name, value in parent.items()
        if name in PASSED_ENV_VARS or name.startswith("LC_")
    }
    env.setdefault("PATH", os.defpath)
    env["CLAUDE_PROJECT_DIR"] = str(project_dir)
    env["SUBAGENTS_PROJECT_DIR"] = str(project_dir)
    return env


async def run_hooks(
    commands: Sequence[HookCommand],
    payload: Mapping[str, Any],
    *,
    cwd: Path,
    env: Mapping[str, str],
    processes: ProcessTracker | None = None,
) -> list[HookRun]:
    """Run ``commands`` concurrently with the same stdin; results in the order given."""
    data = json.dumps(payload, ensure_ascii=False, default=str).encode()
    async with asyncio.TaskGroup() as group:
        tasks = [
            group.create_task(
                run_command_hook(command, data, cwd=cwd, env=env, processes=processes),
                name=f"hook:{command.command[:40]}",
            )
            for command in commands
        ]
    return [task.result() for task in tasks]


async def run_command_hook(
    command: HookCommand,
    stdin: bytes,
    *,
    cwd: Path,
    env: Mapping[str, str],
    processes: ProcessTracker | None = None,
) -> HookRun:
    """Run one hook; when it ends (or times out, or the caller is cancelled) everything it
    started is ended too: its process group, and every process carrying its run tag. It holds
    a process slot while it runs (``descriptors``): past the budget it waits, not fails."""
    if command.callback is not None:
        return await run_callback_hook(command, stdin)
    async with process_slot():
        return await _run_command_hook(command, stdin, cwd=cwd, env=env, processes=processes)


async def _run_command_hook(
    command: HookCommand,
    stdin: bytes,
    *,
    cwd: Path,
    env: Mapping[str, str],
    processes: ProcessTracker | None,
) -> HookRun:
    """The hook's process waited for through a pidfd (``processes.start_piped``); where there
    are no pidfds, through asyncio's subprocesses (``_run_command_hook_asyncio``)."""
    if not have_pidfds():
        return await _run_command_hook_asyncio(
            command, stdin, cwd=cwd, env=env, processes=processes
        )
    tag = uuid.uuid4().hex
    argv = ("/bin/sh", "-c", command.command)
    # trace_env: a hook that traces itself continues our trace.
    hook_env = {**env, **trace_env(), RUN_TAG_VARIABLE: tag}

    async def start() -> Piped:
        return start_piped(argv, cwd=cwd, env=hook_env)

    try:
        proc = await retry_on_emfile(start)
    except OSError as exc:
        return HookRun(command=command, exit_code=None, error=f"{type(exc).__name__}: {exc}")
    outputs = (CappedOutput(MAX_OUTPUT_BYTES), CappedOutput(MAX_OUTPUT_BYTES))
    readers = (PipeReader(outputs[0].feed), PipeReader(outputs[1].feed))
    try:
        if processes is not None:  # inside: should recording the group fail, the hook is ended
            processes.add(proc.pid)
        readers[0].read_from(proc.stdout)
        readers[1].read_from(proc.stderr)
        async with asyncio.timeout(command.timeout):
            await feed(proc, stdin)  # both within the timeout, as ``gather`` would: no tasks
            await wait_exited(proc.pidfd)
    except TimeoutError:
        await _end_piped(proc, tag, readers)
        return HookRun(command=command, exit_code=None, timed_out=True, pid=proc.pid)
    except BaseException:
        await _end_piped(proc, tag, readers)
        raise
    finally:
        if processes is not None:
            processes.discard(proc.pid)
    # The shell is done: what it left running (background jobs, setsid daemons) goes too, which
    # also closes the pipes they held, so reading ends.
    code = await _end_piped(proc, tag, readers, exited=True)
    out, err = outputs
    return HookRun(
        command=command, exit_code=code, stdout=_text(out), stderr=_text(err), pid=proc.pid
    )


async def _end_piped(
    proc: Piped, tag: str, readers: tuple[PipeReader, ...], *, exited: bool = False
) -> int | None:
    """SIGKILL the hook's group and every tagged process, reap the shell (``exited``: its
    pidfd has said so already), finish reading, close every descriptor; the shell's status
    (None if it could not be reaped in time).

    Shielded: this also runs while the caller is being cancelled, and must still finish."""

    async def end() -> int | None:
        code = None
        try:
            # Before the reap: until then the shell's PID is still its group's id, so this
            # signal cannot reach a stranger that reused it.
            proc.kill_group()
            await asyncio.to_thread(kill_tagged, tag)
            try:
                if not exited:
                    async with asyncio.timeout(_REAP_TIMEOUT_S):
                        await wait_exited(proc.pidfd)
                code = reap(proc.pidfd)
            except ChildProcessError:  # reaped by code that waits for any child: status lost
                pass
            except TimeoutError:  # stuck in the kernel: reaped by a thread whenever it ends
                reap_later(proc)
            # Every holder of the pipes is gone, so the reads see EOF; bounded all the same.
            ends = [r.done for r in readers if r.done is not None and not r.done.done()]
            if ends:
                await asyncio.wait(ends, timeout=_REAP_TIMEOUT_S)
        finally:
            for reader in readers:
                reader.stop()  # off the loop's selector before its pipe closes
            proc.close()
        return code

    return await asyncio.shield(asyncio.create_task(end(), name=f"hook-end:{proc.pid}"))


def _text(output: CappedOutput) -> str:
    text = output.kept.decode(errors="replace")
    if output.dropped:
        text += f"\n[hook output truncated: {output.dropped:,} more bytes not read]"
    return text


async def _run_command_hook_asyncio(
    command: HookCommand,
    stdin: bytes,
    *,
    cwd: Path,
    env: Mapping[str, str],
    processes: ProcessTracker | None,
) -> HookRun:
    """Where there are no pidfds (not Linux, kernels before 5.4): the shell waited for by a
    thread without being reaped (``process_waiter``), so its group is SIGKILLed while its id is
    still the shell's (before, asyncio's child watcher had reaped it by then)."""
    tag = uuid.uuid4().hex
    pipes: list[tuple[int, int]] = []  # stdin, stdout, stderr: (read end, write end)
    try:
        for _ in range(3):
            pipes.append(await open_pipe())
    except BaseException:
        _close(fd for pipe in pipes for fd in pipe)
        raise
    (stdin_read, stdin_write), (out_read, out_write), (err_read, err_write) = pipes
    try:
        proc = await retry_on_emfile(
            lambda: _spawn_hook(command, cwd, {**env, RUN_TAG_VARIABLE: tag}, pipes)
        )
    except OSError as exc:
        _close((stdin_write, out_read, err_read))
        return HookRun(command=command, exit_code=None, error=f"{type(exc).__name__}: {exc}")
    finally:
        _close((stdin_read, out_write, err_write))  # the shell holds its own copies
    readers = [_CappedReader(out_read), _CappedReader(err_read)]
    tasks = [
        asyncio.create_task(reader.run(), name=f"hook-output:{proc.pid}") for reader in readers
    ]
    try:
        if processes is not None:  # inside: should recording the group fail, the hook is ended
            processes.add(proc.pid)
        async with asyncio.timeout(command.timeout):
            os.set_blocking(stdin_write, False)
            await write_all(stdin_write, stdin)  # a hook that exits without reading: fine
            os.close(stdin_write)
            stdin_write = -1
            await asyncio.shield(proc.exited)
    except TimeoutError:
        await _end_tree(proc, tag, tasks)
        return HookRun(command=command, exit_code=None, timed_out=True, pid=proc.pid)
    except BaseException:
        await _end_tree(proc, tag, tasks)
        raise
    finally:
        if stdin_write >= 0:
            os.close(stdin_write)
        if processes is not None:
            processes.discard(proc.pid)
    # The shell is done: what it left running (background jobs, setsid daemons) goes too, which
    # also closes the pipes they held, so reading ends.
    await _end_tree(proc, tag, tasks)
    out, err = readers
    return HookRun(
        command=command,
        exit_code=proc.returncode,
        stdout=out.text(),
        stderr=err.text(),
        pid=proc.pid,
    )


async def _spawn_hook(
    command: HookCommand, cwd: Path, env: Mapping[str, str], pipes: list[tuple[int, int]]
) -> WaitedProcess:
    return spawn_waited(
        ("/bin/sh", "-c", command.command),
        cwd=cwd,
        env={**env, **trace_env()},  # trace_env: a hook that traces itself continues our trace
        stdin=pipes[0][0],
        stdout=pipes[1][1],
        stderr=pipes[2][1],
        new_session=True,
    )


def _close(fds: Iterable[int]) -> None:
    for fd in fds:
        os.close(fd)


async def run_callback_hook(command: HookCommand, stdin: bytes) -> HookRun:
    """An in-process hook: its answer is what a command would have printed on exit 0; an
    exception or a timeout is a failed hook (exit 2 when it blocks on failure, else 1)."""
    assert command.callback is not None
    failed = 2 if command.blocks_on_failure else 1
    try:
        async with asyncio.timeout(command.timeout):
            answer = await command.callback(json.loads(stdin))
    except TimeoutError:
        # A callback that blocks on failure must block (exit 2), not read as a mere timeout.
        return HookRun(
            command=command,
            exit_code=failed,
            stderr=f"hook callback timed out after {command.timeout:g}s",
            timed_out=not command.blocks_on_failure,
        )
    except Exception as exc:
        return HookRun(command=command, exit_code=failed, stderr=f"hook callback failed: {exc}")
    return HookRun(command=command, exit_code=0, stdout=json.dumps(dict(answer), default=str))


class _CappedReader:
    """Reads a pipe to its end, keeping the first ``MAX_OUTPUT_BYTES`` and counting the rest: a
    hook printing 400 MB costs 4 MiB of memory, not 831 MB."""

    def __init__(self, read_fd: int) -> None:
        self.read_fd = read_fd
        self.output = CappedOutput(MAX_OUTPUT_BYTES)

    async def run(self) -> None:
        stream, transport = await open_pipe_reader(self.read_fd)
        try:
            while chunk := await stream.read(1 << 16):
                self.output.feed(chunk)
        finally:
            transport.close()

    def text(self) -> str:
        return _text(self.output)


async def _end_tree(proc: WaitedProcess, tag: str, readers: list[asyncio.Task[None]]) -> None:
    """SIGKILL the hook's group and every tagged process, reap the shell, finish reading.

    Shielded: this also runs while the caller is being cancelled, and must still finish."""

    async def end() -> None:
        proc.kill_group(signal.SIGKILL)  # before the reap: the group's id is the shell's
        await asyncio.to_thread(kill_tagged, tag)
        try:
            await asyncio.wait_for(asyncio.shield(proc.exited), _REAP_TIMEOUT_S)
            proc.reap()
        except TimeoutError:  # stuck in the kernel: its waiter reaps it whenever it ends
            proc.abandon()
        # Every holder of the pipes is gone, so the readers see EOF; bounded all the same.
        _, pending = await asyncio.wait(readers, timeout=_REAP_TIMEOUT_S)
        for task in pending:
            task.cancel()

    await asyncio.shield(asyncio.create_task(end(), name=f"hook-end:{proc.pid}"))
