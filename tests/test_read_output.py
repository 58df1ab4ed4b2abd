"""`processes.read_output`: a short command's output and status, on the pidfd path and on
asyncio's, with no process left behind by a limit, a cancellation or a failure to start."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from subagents.processes import read_output


def _gone(pid: int) -> bool:
    """Neither running nor a zombie: reaped."""
    return not Path(f"/proc/{pid}").exists()


async def test_output_and_status(way: str) -> None:
    env = dict(os.environ, GREETING="hello")
    code, out = await read_output(
        ("sh", "-c", 'printf "%s\\n" "$GREETING"; echo err >&2; exit 3'), env, limit=100
    )
    assert (code, out) == (3, b"hello\n")  # stderr went nowhere
    code, out = await read_output(("sh", "-c", "read x; echo got:$x"), env, limit=100)
    assert (code, out) == (0, b"got:\n")  # stdin is /dev/null
    code, _ = await read_output(("sh", "-c", "kill -9 $$"), env, limit=100)
    assert code == -9


async def test_a_missing_program_is_an_os_error(way: str) -> None:
    with pytest.raises(OSError):
        await read_output(("no-such-program-here",), dict(os.environ), limit=10)


async def test_output_past_the_limit_is_cut_and_the_process_ended(way: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"echo $$ > {pid_file}; exec yes"
    code, out = await read_output(("sh", "-c", script), dict(os.environ), limit=50_000)
    assert code is None and len(out) > 50_000 and out.startswith(b"y\ny\n")
    assert _gone(int(pid_file.read_text()))


async def test_a_cancelled_caller_leaves_no_process(way: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; exec sleep 30"
    task = asyncio.create_task(
        read_output(("sh", "-c", script), dict(os.environ), limit=100), name="reader"
    )
    for _ in range(500):
        if pid_file.exists():
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _gone(int(pid_file.read_text()))


async def test_no_descriptor_is_left_open(way: str) -> None:
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        await read_output(("true",), dict(os.environ), limit=10)
    assert len(os.listdir("/proc/self/fd")) <= before


async def test_a_process_that_left_its_output_to_a_daemon_is_done_when_it_exits(
    way: str, tmp_path: Path
) -> None:
    """``sh -c 'cmd &'`` (a git that starts its fsmonitor daemon, a wrapper that forks): the
    grandchild holds the pipe open long after the process has exited, so reading to the pipe's
    end would wait as long as the daemon lives. The output is what the process wrote."""
    pid_file = tmp_path / "daemon"
    script = f"echo before; sleep 30 & echo $! > {pid_file}; echo after; exit 4"
    try:
        code, out = await asyncio.wait_for(
            read_output(("sh", "-c", script), dict(os.environ), limit=1000), timeout=10
        )
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), 9)
    assert (code, out) == (4, b"before\nafter\n")


async def test_no_descriptor_of_this_process_is_passed_on(way: str) -> None:
    """Only stdin, stdout and stderr: a descriptor this process holds inheritable (one its
    own parent passed it, a library's) is not the command's to keep — a daemon it starts
    would hold it open for as long as it lives (a pipe's write end: its reader never sees its
    end). ``subprocess`` closes them (``close_fds``); ``posix_spawn`` passes them on."""
    read_end, write_end = os.pipe()
    try:
        os.set_inheritable(write_end, True)
        script = f"if [ -e /proc/$$/fd/{write_end} ]; then echo passed; else echo closed; fi"
        code, out = await read_output(("sh", "-c", script), dict(os.environ), limit=100)
        assert (code, out) == (0, b"closed\n")
        assert os.get_inheritable(write_end)  # this process's own is left as it was
    finally:
        os.close(read_end)
        os.close(write_end)
