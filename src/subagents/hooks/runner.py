"""Running command hooks: one ``/bin/sh -c`` process per hook, JSON on stdin, bounded in time.

Environment. A hook gets a *clean* environment, not the runtime's: only ``PATH``, ``HOME``,
``LANG``, ``LC_*``, ``TERM``, ``SHELL``, ``USER`` and ``TMPDIR`` are copied from the parent, plus
``CLAUDE_PROJECT_DIR`` (the name Claude Code hooks already use) and ``SUBAGENTS_PROJECT_DIR``, both
the project directory, and — when telemetry is on — ``TRACEPARENT``/``TRACESTATE`` of the span
that fired the hook (``observe.trace_env``). API keys and other secrets of the session therefore
never reach a hook script, which is often a third-party file checked into a repository.

Processes. Each hook runs in its own session (``start_new_session=True``), so its process group
holds the shell and everything it spawned. A hook past its timeout, or whose caller is cancelled,
has that whole group killed with SIGKILL and is reaped before the call returns (or re-raises), so
no hook outlives the event that started it. While it runs, the group is also registered in the
caller's ``ProcessTracker`` so an agent's final cleanup reaches it too. A hook is done when its
stdout and stderr close: one that leaves a background process holding them open runs into its
timeout (redirect such a process's output to detach it).

The hooks of one event run concurrently, as Claude Code runs them; results come back in config
order so aggregation is deterministic.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from subagents.hooks.config import HookCommand
from subagents.observe import trace_env
from subagents.processes import ProcessTracker, kill_group

PASSED_ENV_VARS: Final = ("PATH", "HOME", "LANG", "TERM", "SHELL", "USER", "TMPDIR")
"""Variables copied from the runtime's environment into a hook's (plus every ``LC_*``)."""

_REAP_TIMEOUT_S: Final = 5.0


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
    """Run one hook; a timeout or a cancellation kills its whole process group."""
    try:
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            command.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env={**env, **trace_env()},  # a hook that traces itself continues our trace
            start_new_session=True,
        )
    except OSError as exc:
        return HookRun(command=command, exit_code=None, error=f"{type(exc).__name__}: {exc}")
    if processes is not None:
        processes.add(proc.pid)
    try:
        async with asyncio.timeout(command.timeout):
            out, err = await proc.communicate(stdin)
    except TimeoutError:
        await _kill_and_reap(proc)
        return HookRun(command=command, exit_code=None, timed_out=True, pid=proc.pid)
    except BaseException:
        await _kill_and_reap(proc)
        raise
    finally:
        if processes is not None:
            processes.discard(proc.pid)
    return HookRun(
        command=command,
        exit_code=proc.returncode,
        stdout=out.decode(errors="replace"),
        stderr=err.decode(errors="replace"),
        pid=proc.pid,
    )


async def _kill_and_reap(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the hook's group, then wait (bounded) so it leaves no zombie behind."""
    kill_group(proc.pid, signal.SIGKILL)
    # Shielded: this also runs while the caller is being cancelled, and must still finish.
    reap = asyncio.ensure_future(asyncio.wait_for(proc.wait(), _REAP_TIMEOUT_S))
    try:
        await asyncio.shield(reap)
    except TimeoutError:
        pass
