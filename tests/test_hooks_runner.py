"""The command-hook runner with real processes: timeouts, cancellation, clean env, concurrency."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from subagents.hooks import HookCommand, clean_environment, run_hooks
from subagents.processes import ProcessTracker


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


async def test_hook_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
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
    assert await wait_gone(sh_pid)
    assert await wait_gone(child_pid)


async def test_cancellation_kills_the_hook_process_group(tmp_path: Path) -> None:
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
    assert await wait_gone(sh_pid)
    assert await wait_gone(child_pid)
    assert tracker.groups == frozenset()


async def test_hook_environment_is_clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
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


async def test_hooks_of_one_event_run_concurrently(tmp_path: Path) -> None:
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


async def test_payload_arrives_on_stdin(tmp_path: Path) -> None:
    command = HookCommand(command="cat")
    [run] = await run_hooks(
        [command], {"hook_event_name": "Stop", "ü": 1}, cwd=tmp_path, env={"PATH": os.defpath}
    )
    assert json.loads(run.stdout) == {"hook_event_name": "Stop", "ü": 1}


async def test_unstartable_hook_reports_why(tmp_path: Path) -> None:
    [run] = await run_hooks(
        [HookCommand(command="true")], {}, cwd=tmp_path / "missing", env={"PATH": os.defpath}
    )
    assert run.exit_code is None
    assert "missing" in run.error


# --- process trees and output caps (issue 13 item 9) ------------------------------------------


async def test_a_setsid_daemon_started_by_a_hook_is_ended_with_it(tmp_path: Path) -> None:
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


async def test_hook_output_is_capped_with_a_note(tmp_path: Path) -> None:
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


async def test_a_large_payload_reaches_a_hook_that_never_reads_it(tmp_path: Path) -> None:
    [run] = await run_hooks(
        [HookCommand(command="echo fine", timeout=20)],
        {"blob": "x" * (4 * 1024 * 1024)},
        cwd=tmp_path,
        env={"PATH": os.defpath},
    )
    assert run.exit_code == 0 and run.stdout.strip() == "fine"


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
