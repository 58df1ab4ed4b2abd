"""The command-hook runner with real processes: timeouts, cancellation, clean env, concurrency.

Most tests run both ways a hook's process is run: through a pidfd (``processes.start_piped``,
Linux 5.4+) and through asyncio's subprocesses (where there are no pidfds)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from subagents import processes
from subagents.hooks import HookCommand, clean_environment, run_hooks
from subagents.processes import RUN_TAG_VARIABLE, ProcessTracker, kill_tagged


def reaped(pid: int) -> bool:
    """Neither running nor a zombie: nothing is left of it (a PID is not reused this soon)."""
    return not Path(f"/proc/{pid}").exists()


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # ESRCH: it exited mid-read
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def wait_gone(pid: int, limit_s: float = 3.0) -> bool:
    deadline = time.monotonic() + limit_s
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def wait_file(path: Path, limit_s: float = 5.0) -> str:
    deadline = time.monotonic() + limit_s
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path} never appeared"
        await asyncio.sleep(0.02)
    return path.read_text().strip()


HANG = 'sleep 60 & echo $! > "{d}/child.pid"; echo $$ > "{d}/sh.pid"; wait'


async def test_hook_past_its_timeout_is_killed_with_its_children(way: str, tmp_path: Path) -> None:
    command = HookCommand(command=HANG.format(d=tmp_path), timeout=0.5)
    started = time.monotonic()
    [run] = await run_hooks(
        [command], {}, cwd=tmp_path, env=clean_environment(tmp_path, os.environ)
    )
    assert run.timed_out
    assert run.exit_code is None
    assert time.monotonic() - started < 10
    sh_pid = int((tmp_path / "sh.pid").read_text())
    child_pid = int((tmp_path / "child.pid").read_text())
    assert run.pid == sh_pid
    assert reaped(sh_pid)  # before run_hooks returned
    assert await wait_gone(child_pid)


async def test_cancellation_kills_the_hook_process_group(way: str, tmp_path: Path) -> None:
    tracker = ProcessTracker()
    command = HookCommand(command=HANG.format(d=tmp_path), timeout=60)
    env = clean_environment(tmp_path, os.environ)
    task = asyncio.create_task(run_hooks([command], {}, cwd=tmp_path, env=env, processes=tracker))
    sh_pid = int(await wait_file(tmp_path / "sh.pid"))
    child_pid = int(await wait_file(tmp_path / "child.pid"))
    for _ in range(100):  # the shell may write its files before the spawn call has returned
        if tracker.groups:
            break
        await asyncio.sleep(0.02)
    assert tracker.groups == {sh_pid}  # registered with the owner while it runs
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert reaped(sh_pid)  # before the cancellation reached the caller
    assert await wait_gone(child_pid)
    assert tracker.groups == frozenset()


async def test_hook_environment_is_clean(
    way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-nope")
    monkeypatch.setenv("LC_ALL", "C")
    project = tmp_path / "proj"
    project.mkdir()
    command = HookCommand(command=f'env > "{tmp_path}/env.txt"; pwd > "{tmp_path}/pwd.txt"')
    [run] = await run_hooks([command], {}, cwd=project, env=clean_environment(project, os.environ))
    assert run.exit_code == 0
    env = dict(
        line.split("=", 1)
        for line in (tmp_path / "env.txt").read_text().splitlines()
        if "=" in line
    )
    assert "SECRET_TOKEN" not in env
    assert "ANTHROPIC_API_KEY" not in env
    assert env["CLAUDE_PROJECT_DIR"] == str(project)
    assert env["SUBAGENTS_PROJECT_DIR"] == str(project)
    assert env["LC_ALL"] == "C"
    assert env["PATH"] == os.environ["PATH"]
    assert (tmp_path / "pwd.txt").read_text().strip() == str(project)


async def test_hooks_of_one_event_run_concurrently(way: str, tmp_path: Path) -> None:
    # Each hook announces itself, then waits for the other: run one after the other, the first
    # would time out. Results come back in config order.
    script = (
        'touch "{d}/{me}"; i=0; while [ ! -e "{d}/{other}" ]; do '
        "i=$((i+1)); [ $i -gt 100 ] && exit 1; sleep 0.05; done; echo {me}"
    )
    commands = [
        HookCommand(command=script.format(d=tmp_path, me="a", other="b"), timeout=4),
        HookCommand(command=script.format(d=tmp_path, me="b", other="a"), timeout=4),
    ]
    runs = await run_hooks(commands, {}, cwd=tmp_path, env=clean_environment(tmp_path, {}))
    assert [(r.exit_code, r.stdout.strip()) for r in runs] == [(0, "a"), (0, "b")]


async def test_payload_arrives_on_stdin(way: str, tmp_path: Path) -> None:
    command = HookCommand(command="cat")
    [run] = await run_hooks(
        [command], {"hook_event_name": "Stop", "ü": 1}, cwd=tmp_path, env={"PATH": os.defpath}
    )
    assert json.loads(run.stdout) == {"hook_event_name": "Stop", "ü": 1}


async def test_unstartable_hook_reports_why(way: str, tmp_path: Path) -> None:
    [run] = await run_hooks(
        [HookCommand(command="true")], {}, cwd=tmp_path / "missing", env={"PATH": os.defpath}
    )
    assert run.exit_code is None
    assert "missing" in run.error


# --- process trees and output caps (issue 13 item 9) ------------------------------------------


async def test_a_setsid_daemon_started_by_a_hook_is_ended_with_it(way: str, tmp_path: Path) -> None:
    # setsid puts the daemon in a session of its own: no group kill reaches it.
    script = (
        f'setsid sleep 300 > /dev/null 2>&1 < /dev/null & echo $! > "{tmp_path}/daemon.pid"; '
        f"setsid sh -c 'sleep 300 & echo $! > \"{tmp_path}/grandchild.pid\"; wait' "
        "> /dev/null 2>&1 < /dev/null &"
        f" sleep 0.3; echo done"
    )
    [run] = await run_hooks(
        [HookCommand(command=script, timeout=30)],
        {},
        cwd=tmp_path,
        env=clean_environment(tmp_path, os.environ),
    )
    assert run.exit_code == 0 and run.stdout.strip() == "done"
    for name in ("daemon.pid", "grandchild.pid"):
        pid = int(await wait_file(tmp_path / name))
        assert await wait_gone(pid), f"{name} {pid} outlived its hook"


async def test_a_background_job_holding_stdout_does_not_keep_the_hook_running(
    way: str,
    tmp_path: Path,
) -> None:
    script = f'sleep 60 & echo $! > "{tmp_path}/job.pid"; echo ok'
    started = time.monotonic()
    [run] = await run_hooks(
        [HookCommand(command=script, timeout=50)],
        {},
        cwd=tmp_path,
        env=clean_environment(tmp_path, os.environ),
    )
    assert time.monotonic() - started < 10
    assert not run.timed_out and run.exit_code == 0 and run.stdout.strip() == "ok"
    assert await wait_gone(int((tmp_path / "job.pid").read_text()))


async def test_hook_output_is_capped_with_a_note(way: str, tmp_path: Path) -> None:
    from subagents.hooks.runner import MAX_OUTPUT_BYTES

    size = MAX_OUTPUT_BYTES * 6
    script = f"head -c {size} /dev/zero | tr '\\0' x; head -c {size} /dev/zero | tr '\\0' y >&2"
    [run] = await run_hooks(
        [HookCommand(command=script, timeout=60)], {}, cwd=tmp_path, env={"PATH": os.defpath}
    )
    assert run.exit_code == 0
    for text, letter in ((run.stdout, "x"), (run.stderr, "y")):
        body, _, note = text.rpartition("\n")
        assert body == letter * MAX_OUTPUT_BYTES
        assert note == f"[hook output truncated: {size - MAX_OUTPUT_BYTES:,} more bytes not read]"


async def test_a_large_payload_reaches_a_hook_that_never_reads_it(way: str, tmp_path: Path) -> None:
    [run] = await run_hooks(
        [HookCommand(command="echo fine", timeout=20)],
        {"blob": "x" * (4 * 1024 * 1024)},
        cwd=tmp_path,
        env={"PATH": os.defpath},
    )
    assert run.exit_code == 0 and run.stdout.strip() == "fine"


GRANDCHILD = (
    'sh -c \'sleep 60 & echo $! > "{d}/grandchild.pid"; wait\' & echo $$ > "{d}/sh.pid"; wait'
)


async def test_a_timeout_ends_the_grandchildren_too(way: str, tmp_path: Path) -> None:
    command = HookCommand(command=GRANDCHILD.format(d=tmp_path), timeout=0.5)
    env = clean_environment(tmp_path, os.environ)
    [run] = await run_hooks([command], {}, cwd=tmp_path, env=env)
    assert run.timed_out and run.exit_code is None
    assert reaped(int((tmp_path / "sh.pid").read_text()))
    assert await wait_gone(int(await wait_file(tmp_path / "grandchild.pid")))


async def test_a_cancelled_hook_leaves_no_process_and_no_descriptor(
    way: str, tmp_path: Path
) -> None:
    env = clean_environment(tmp_path, os.environ)
    command = HookCommand(command=GRANDCHILD.format(d=tmp_path), timeout=60)
    before = len(os.listdir("/proc/self/fd"))
    task = asyncio.create_task(run_hooks([command], {"x": 1}, cwd=tmp_path, env=env))
    sh_pid = int(await wait_file(tmp_path / "sh.pid"))
    grandchild = int(await wait_file(tmp_path / "grandchild.pid"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert reaped(sh_pid)
    assert await wait_gone(grandchild)
    assert len(os.listdir("/proc/self/fd")) <= before


async def test_no_descriptor_of_ours_reaches_a_hook(way: str, tmp_path: Path) -> None:
    # An inheritable descriptor (as a library's, or one our own parent passed us) stays ours.
    read_end, write_end = os.pipe()
    os.set_inheritable(read_end, True)
    os.set_inheritable(write_end, True)
    try:
        ours = f"pipe:[{os.fstat(read_end).st_ino}]"
        listing = 'for f in /proc/$$/fd/*; do echo "${f##*/} $(readlink "$f")"; done'
        [run] = await run_hooks(
            [HookCommand(command=listing)], {}, cwd=tmp_path, env={"PATH": os.defpath}
        )
    finally:
        os.close(read_end)
        os.close(write_end)
    assert run.exit_code == 0, run.stderr
    fds = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert {"0", "1", "2"} <= fds.keys()  # the listing saw the shell's descriptors
    assert ours not in fds.values()
    assert str(read_end) not in fds and str(write_end) not in fds


async def test_no_descriptor_is_left_open_by_hook_runs(way: str, tmp_path: Path) -> None:
    env = {"PATH": os.defpath}
    commands = [HookCommand(command="cat"), HookCommand(command="echo x >&2; exit 2")]
    await run_hooks(commands, {"warm": "up"}, cwd=tmp_path, env=env)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(10):
        runs = await run_hooks(commands, {"a": 1}, cwd=tmp_path, env=env)
        assert [run.exit_code for run in runs] == [0, 2]
    [run] = await run_hooks(
        [HookCommand(command="exec sleep 30", timeout=0.2)], {}, cwd=tmp_path, env=env
    )
    assert run.timed_out
    await run_hooks([HookCommand(command="true")], {}, cwd=tmp_path / "missing", env=env)
    assert len(os.listdir("/proc/self/fd")) <= before


async def test_exit_codes_and_streams_come_back_as_they_were(way: str, tmp_path: Path) -> None:
    env = {"PATH": os.defpath}
    commands = [
        HookCommand(command="echo out; echo err >&2; exit 0"),
        HookCommand(command="echo blocked >&2; exit 2"),
        HookCommand(command="printf 'no newline'; exit 7"),
        HookCommand(command="kill -9 $$"),
    ]
    runs = await run_hooks(commands, {}, cwd=tmp_path, env=env)
    assert [(r.exit_code, r.stdout, r.stderr, r.timed_out) for r in runs] == [
        (0, "out\n", "err\n", False),
        (2, "", "blocked\n", False),
        (7, "no newline", "", False),
        (-9, "", "", False),
    ]
    assert all(run.pid is not None and reaped(run.pid) for run in runs)


async def test_a_payload_larger_than_the_pipe_buffer_arrives_whole(
    way: str, tmp_path: Path
) -> None:
    payload = {"tool_input": {"content": "é" * 600_000}}  # 1.2 MB: ~18 pipe buffers
    [run] = await run_hooks(
        [HookCommand(command="cat", timeout=30)], payload, cwd=tmp_path, env={"PATH": os.defpath}
    )
    assert run.exit_code == 0
    assert json.loads(run.stdout) == payload


async def test_a_hook_that_never_reads_its_input_is_not_held_up(way: str, tmp_path: Path) -> None:
    # It runs a while without reading a payload that fills its pipe, then exits: the write
    # ends there (a broken pipe, not an error), and the loop was never blocked meanwhile.
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    [run] = await run_hooks(
        [HookCommand(command="sleep 0.4; echo fine", timeout=20)],
        {"blob": "x" * (2 * 1024 * 1024)},
        cwd=tmp_path,
        env={"PATH": os.defpath},
    )
    ticker.cancel()
    assert run.exit_code == 0 and run.stdout == "fine\n"
    assert ticks >= 10


async def test_a_hook_that_never_reads_and_never_exits_still_times_out(
    way: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    [run] = await run_hooks(
        [HookCommand(command=f'echo $$ > "{tmp_path}/sh.pid"; exec sleep 60', timeout=0.5)],
        {"blob": "x" * (2 * 1024 * 1024)},
        cwd=tmp_path,
        env={"PATH": os.defpath},
    )
    assert run.timed_out and run.exit_code is None
    assert time.monotonic() - started < 10
    assert reaped(int((tmp_path / "sh.pid").read_text()))


async def test_a_group_that_cannot_be_recorded_leaves_no_hook_running(
    way: str, tmp_path: Path
) -> None:
    # A child records each group on disk for crash recovery; should that fail, the hook it
    # was for must not run on unowned.
    groups: list[int] = []

    def record(pgid: int) -> None:
        groups.append(pgid)
        raise OSError(28, "No space left on device")

    command = HookCommand(command="exec sleep 60", timeout=60)
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(ExceptionGroup) as failed:
        await run_hooks(
            [command],
            {},
            cwd=tmp_path,
            env={"PATH": os.defpath},
            processes=ProcessTracker(on_add=record),
        )
    assert failed.group_contains(OSError)
    [sh_pid] = groups  # the group's ID is the shell's PID
    assert reaped(sh_pid)
    assert len(os.listdir("/proc/self/fd")) <= before


def test_no_hook_daemon_outlives_a_cli_run(tmp_path: Path) -> None:
    from cli_helpers import run_script, tool_call, wait_until_dead, write_script
    from test_hooks_permissions_e2e import hook, write_settings

    script = tmp_path / "daemon.sh"
    script.write_text(
        "#!/bin/sh\ncat > /dev/null\n"
        f'setsid sleep 300 > /dev/null 2>&1 < /dev/null & echo $! >> "{tmp_path}/pids"\n'
        "head -c 20000000 /dev/zero | tr '\\0' x\n"  # 20 MB of output, capped
    )
    script.chmod(0o755)
    write_settings(tmp_path, {"hooks": {"PostToolUse": [hook(str(script))]}})
    calls = [tool_call("Glob", pattern="*.sh")]
    turns = [{"tool_calls": calls}, {"text": "done"}]
    run = run_script(write_script(tmp_path, [{"agent_type": "main", "turns": turns}]), tmp_path)
    assert run.code == 0, run.stderr
    assert run.json()["result"] == "done"
    pids = [int(line) for line in (tmp_path / "pids").read_text().split()]
    assert pids and all(wait_until_dead(pid) for pid in pids)


def test_the_tag_search_reads_whole_environments_and_matches_whole_entries() -> None:
    # A hook's daemon may carry a big environment: its tag can lie past the first read.
    tag = uuid.uuid4().hex
    big = {"BIG1": "x" * 100_000, "BIG2": "y" * 100_000}
    tagged = subprocess.Popen(["sleep", "30"], env={**big, RUN_TAG_VARIABLE: tag})
    # The tag inside another entry's value, and a longer tag: neither is this run's.
    lookalike = subprocess.Popen(
        ["sleep", "30"], env={"OTHER": f"{RUN_TAG_VARIABLE}={tag}", RUN_TAG_VARIABLE: tag + "0"}
    )
    try:
        assert set(kill_tagged(tag)) == {tagged.pid}
        assert tagged.wait(5) == -9
        assert lookalike.poll() is None
    finally:
        for proc in (tagged, lookalike):
            proc.kill()
            proc.wait()


def test_the_tag_search_never_signals_a_process_that_took_a_tagged_ones_number(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between the look at ``/proc/<pid>/environ`` and the signal, the tagged process may
    exit and its number go to a stranger: the signal must reach only a process that carries
    the tag when it is sent (pidfd). The race made certain: the first look at the stranger
    says it is tagged, as the look at its number's previous process did."""

    tag = uuid.uuid4().hex
    stranger = subprocess.Popen(["sleep", "30"], env={"PATH": os.environ.get("PATH", "")})
    real = processes._has_tag
    looked: set[int] = set()

    def first_look_saw_the_old_process(pid: int, needle: bytes) -> bool:
        if pid == stranger.pid and pid not in looked:
            looked.add(pid)
            return True
        return real(pid, needle)

    monkeypatch.setattr(processes, "_has_tag", first_look_saw_the_old_process)
    try:
        assert kill_tagged(tag) == []
        assert stranger.poll() is None  # not signalled
    finally:
        stranger.kill()
        stranger.wait()
