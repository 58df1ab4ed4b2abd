"""What the process benches share: a command run with no runtime, and interleaved rounds.

``bash_bench.py`` and ``hook_bench.py`` each set a runtime's process call beside its floor —
the same command started by ``posix_spawn`` in a session of its own, its output read by the
loop, its exit awaited through a pidfd — and measure every kind once per round, so a drift of
the machine lands on all kinds alike. Both live here once.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from statistics import median
from typing import Any

Measure = Callable[[], Coroutine[Any, Any, float]]


async def bare_run(
    shell: str,
    command: str,
    cwd: Path,
    env: Mapping[str, str],
    *,
    data: bytes | None = None,
    merge: bool = False,
) -> tuple[int, int]:
    """``shell -c command`` in a new session: ``data`` on its stdin (``/dev/null`` when None),
    stdout and stderr on one pipe (``merge``) or two, read to their end by the loop, its exit
    awaited through a pidfd. Returns its exit status and how many bytes it printed."""
    loop = asyncio.get_running_loop()
    if data is None:
        stdin_r, stdin_w = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC), -1
    else:
        stdin_r, stdin_w = os.pipe2(os.O_CLOEXEC)
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = (out_r, out_w) if merge else os.pipe2(os.O_CLOEXEC)
    here = os.getcwd()
    os.chdir(cwd)  # what posix_spawn's chdir file action would do (Python 3.11 has none)
    try:
        pid = os.posix_spawn(
            shell,
            [shell, "-c", command],
            env,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, stdin_r, 0),
                (os.POSIX_SPAWN_DUP2, out_w, 1),
                (os.POSIX_SPAWN_DUP2, err_w, 2),
            ],
            setsid=True,
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
        )
    finally:
        os.chdir(here)
    for fd in {stdin_r, out_w, err_w}:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    if data is not None:
        try:
            os.write(stdin_w, data)  # smaller than the pipe's buffer
        except BrokenPipeError:
            pass
        os.close(stdin_w)
    size = 0
    done: dict[int, asyncio.Future[None]] = {}
    for fd in (out_r, err_r, pidfd):
        if fd not in done:
            os.set_blocking(fd, False)
            done[fd] = loop.create_future()

    def readable(fd: int) -> None:
        nonlocal size
        if fd != pidfd:
            chunk = os.read(fd, 65536)
            size += len(chunk)
            if chunk:
                return
        loop.remove_reader(fd)
        done[fd].set_result(None)

    for fd in done:
        loop.add_reader(fd, readable, fd)
    await asyncio.gather(*done.values())
    result = os.waitid(os.P_PIDFD, pidfd, os.WEXITED)
    for fd in done:
        os.close(fd)
    assert result is not None
    return result.si_status, size


async def interleaved(measures: Mapping[str, Measure], rounds: int) -> dict[str, list[float]]:
    """Each measure once as a warm-up (imports, caches, the first session's freeze), then
    ``rounds`` rounds of every measure in turn: each measure's figures, one per round."""
    figures: dict[str, list[float]] = {name: [] for name in measures}
    for measure in measures.values():
        await measure()
    for _ in range(rounds):
        for name, measure in measures.items():
            figures[name].append(await measure())
    return figures


def print_medians(per: Mapping[str, list[float]], unit: str, width: int) -> None:
    """A line per measure: its median and every round's figure, in the order measured."""
    for name, values in per.items():
        shown = " ".join(f"{v:.3f}" for v in values)
        print(f"{name:{width}} median {median(values):.3f} {unit}   ({shown})")
