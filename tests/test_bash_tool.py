"""The Bash tool against real subprocesses: exit codes, cwd/env, timeouts, cancellation, caps.

The process-lifetime tests record the PID of a grandchild (`sleep ... &`) and assert it is gone
afterwards: that is the orphan the tool exists to prevent. Every test that runs a command runs
both ways (the ``way`` fixture): through ``start_piped`` and a pidfd, and through asyncio's
subprocesses, the fallback where there are no pidfds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.tools.base import CallInfo, ToolContext, ToolError, ToolOutput
from subagents.tools.bash import (
    DEFAULT_TIMEOUT_MS,
    MAX_OUTPUT_CHARS,
    MAX_TIMEOUT_MS,
    BashTool,
    CommandOutput,
)
from subagents.tools.inputs.bash import BashInput


def make_ctx(cwd: Path, **kwargs: Any) -> ToolContext:
    return ToolContext(
        cwd=cwd,
        roots=(cwd,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="agent-1", agent_type="main"),
        **kwargs,
    )


def make_info(sink: list[dict[str, Any]] | None = None) -> CallInfo:
    events = sink if sink is not None else []
    return CallInfo(tool_use_id="toolu_1", progress=events.append)


async def run(ctx: ToolContext, command: str, **kwargs: Any) -> ToolOutput:
    return await BashTool().call(BashInput(command=command, **kwargs), ctx, make_info())


def is_gone(pid: int, within_s: float = 5.0) -> bool:
    """True once ``pid`` no longer exists or is a zombie (dead, waiting for its reaper)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):  # ESRCH: it exited mid-read
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


async def wait_for_file(path: Path, within_s: float = 10.0) -> str:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} was never written")


@pytest.fixture
def ctx(way: str, tmp_path: Path) -> ToolContext:
    return make_ctx(tmp_path)


# ----------------------------------------------------------------------------- results


async def test_success_returns_output_and_metadata(ctx: ToolContext) -> None:
    out = await run(ctx, "echo hello")
    assert out.content == "hello"
    assert out.is_error is False
    assert out.metadata == {"exit_code": 0, "command": "echo hello", "timed_out": False}
    assert ctx.processes.groups == frozenset()


async def test_nonzero_exit_is_error_with_code_and_merged_stderr(ctx: ToolContext) -> None:
    out = await run(ctx, "echo out; echo err >&2; exit 3")
    assert out.is_error is True
    assert out.content == "out\nerr\nExit code 3"
    assert out.metadata is not None
    assert out.metadata["exit_code"] == 3
    assert out.metadata["timed_out"] is False


async def test_death_by_signal_reads_as_128_plus_signal(ctx: ToolContext) -> None:
    out = await run(ctx, "kill -9 $$")
    assert out.is_error is True
    assert out.metadata is not None
    assert out.metadata["exit_code"] == 137
    assert "Exit code 137" in out.content


async def test_empty_output_says_so(ctx: ToolContext) -> None:
    out = await run(ctx, "true")
    assert out.content == "(no output)"
    assert out.is_error is False


async def test_cwd_is_honoured(way: str, tmp_path: Path) -> None:
    workdir = tmp_path / "work dir"
    workdir.mkdir()
    (workdir / "marker.txt").write_text("x")
    ctx = make_ctx(workdir)
    out = await run(ctx, "pwd; ls")
    assert out.content.splitlines() == [str(workdir.resolve()), "marker.txt"]


async def test_env_overlays_the_process_environment(way: str, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, env={"SUBAGENTS_BASH_TEST": "v42", "HOME": str(tmp_path)})
    out = await run(ctx, 'echo "$SUBAGENTS_BASH_TEST|$HOME|${PATH:+has-path}"')
    assert out.content == f"v42|{tmp_path}|has-path"


async def test_with_no_overlay_the_command_sees_this_processs_environment_as_changed(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_BASH_SET", "set-here")
    monkeypatch.setenv("SUBAGENTS_BASH_GONE", "x")
    monkeypatch.delenv("SUBAGENTS_BASH_GONE")
    assert ctx.env == {}
    out = await run(ctx, 'echo "$SUBAGENTS_BASH_SET|${SUBAGENTS_BASH_GONE-unset}|$PATH"')
    assert out.content == f"set-here|unset|{os.environ['PATH']}"


async def test_stdin_is_closed(ctx: ToolContext) -> None:
    out = await run(ctx, "cat; echo done", timeout=5000)
    assert out.content == "done"


async def test_missing_cwd_is_a_tool_error_naming_it(way: str, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path / "nope")
    with pytest.raises(ToolError, match="nope"):
        await run(ctx, "echo hi")
    assert ctx.processes.groups == frozenset()


# ----------------------------------------------------------------------------- process lifetime


async def test_timeout_kills_the_whole_group(ctx: ToolContext, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    started = time.monotonic()
    out = await run(ctx, f"sleep 30 & echo $! > {pidfile}; echo before; sleep 30", timeout=300)
    assert time.monotonic() - started < 10
    assert out.is_error is True
    assert "timed out after 300 ms" in out.content
    assert out.content.startswith("before")
    assert out.metadata is not None
    assert out.metadata["timed_out"] is True
    assert is_gone(int(pidfile.read_text()))
    assert ctx.processes.groups == frozenset()


async def test_timeout_escalates_to_sigkill_when_term_is_ignored(
    ctx: ToolContext, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    started = time.monotonic()
    out = await run(ctx, f"trap '' TERM; sleep 60 & echo $! > {pidfile}; wait", timeout=200)
    elapsed = time.monotonic() - started
    assert out.metadata is not None
    assert out.metadata["timed_out"] is True
    assert 1.5 < elapsed < 15  # the SIGTERM grace (~2 s) was given, then SIGKILL
    assert is_gone(int(pidfile.read_text()))
    assert ctx.processes.groups == frozenset()


async def test_cancellation_kills_the_group_and_reraises(ctx: ToolContext, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    task = asyncio.create_task(run(ctx, f"sleep 1000 & echo $! > {pidfile}; sleep 1000"))
    grandchild = int(await wait_for_file(pidfile))
    (group,) = ctx.processes.groups
    assert os.getpgid(grandchild) == group  # the grandchild is in the tracked group
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert is_gone(grandchild)
    assert is_gone(group)  # the shell itself
    assert ctx.processes.groups == frozenset()


async def test_leftover_background_job_is_killed_after_normal_exit(
    ctx: ToolContext, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    started = time.monotonic()
    out = await run(ctx, f"sleep 1000 >/dev/null 2>&1 & echo $! > {pidfile}; echo ok")
    assert time.monotonic() - started < 5
    assert out.content == "ok"
    assert is_gone(int(pidfile.read_text()))
    assert ctx.processes.groups == frozenset()


async def test_grandchild_holding_stdout_does_not_hang_the_call(
    ctx: ToolContext, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    started = time.monotonic()
    out = await run(ctx, f"sleep 1000 & echo $! > {pidfile}; echo ok")
    assert time.monotonic() - started < 5
    assert out.content == "ok"
    assert is_gone(int(pidfile.read_text()))


async def test_a_daemon_that_left_the_group_holding_the_pipe_is_not_waited_for(
    ctx: ToolContext, tmp_path: Path
) -> None:
    """``setsid`` takes the daemon out of the shell's group, where no group kill reaches it;
    it holds the output pipe open. The read stops at the drain limit (~2 s), not its exit."""
    pidfile = tmp_path / "pid"
    started = time.monotonic()
    try:
        out = await run(ctx, f"setsid sleep 30 & echo $! > {pidfile}; echo ok")
        elapsed = time.monotonic() - started
        assert out.content == "ok"
        assert out.is_error is False
        assert 1.5 < elapsed < 10  # the drain limit was given, not the daemon's 30 s
        assert ctx.processes.groups == frozenset()
    finally:
        with contextlib.suppress(ProcessLookupError, ValueError, FileNotFoundError):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def open_descriptors() -> list[str]:
    return sorted(os.listdir("/proc/self/fd"))


async def eventually(check: Callable[[], bool], within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def test_the_shell_is_reaped_and_no_descriptor_is_left(
    ctx: ToolContext, tmp_path: Path
) -> None:
    before = open_descriptors()
    shells = []
    for command, timeout in (("echo ok", None), ("sleep 30", 200), ("exit 4", None)):
        pidfile = tmp_path / f"shell-{len(shells)}"
        await run(ctx, f"echo $$ > {pidfile}; {command}", timeout=timeout)
        shells.append(int(pidfile.read_text()))
    assert [Path(f"/proc/{pid}").exists() for pid in shells] == [False] * 3  # no zombie
    assert await eventually(lambda: open_descriptors() == before), open_descriptors()
    assert ctx.processes.groups == frozenset()


async def test_a_second_cancellation_still_ends_and_reaps_the_shell(
    ctx: ToolContext, tmp_path: Path
) -> None:
    before = open_descriptors()
    pidfile, shellfile = tmp_path / "pid", tmp_path / "shell"
    task = asyncio.create_task(
        run(ctx, f"echo $$ > {shellfile}; sleep 1000 & echo $! > {pidfile}; sleep 1000")
    )
    grandchild = int(await wait_for_file(pidfile))
    shell = int(shellfile.read_text())
    task.cancel()
    await asyncio.sleep(0)  # the call is ending the shell now
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert is_gone(grandchild)
    assert await eventually(lambda: not Path(f"/proc/{shell}").exists())  # reaped
    assert await eventually(lambda: open_descriptors() == before), open_descriptors()
    assert ctx.processes.groups == frozenset()


# ----------------------------------------------------------------------------- output


async def test_output_over_the_cap_keeps_head_and_tail_with_marker(ctx: ToolContext) -> None:
    out = await run(ctx, "seq 1 100000")
    full = "\n".join(str(i) for i in range(1, 100001)) + "\n"
    omitted = len(full) - MAX_OUTPUT_CHARS
    assert f"[... {omitted} characters of output omitted ...]" in out.content
    assert out.content.startswith("1\n2\n3\n")
    assert out.content.endswith("99999\n100000")
    assert len(out.content) < MAX_OUTPUT_CHARS + 100


async def test_output_at_the_cap_is_whole(ctx: ToolContext) -> None:
    out = await run(ctx, f"head -c {MAX_OUTPUT_CHARS} /dev/zero | tr '\\0' a")
    assert out.content == "a" * MAX_OUTPUT_CHARS


async def test_huge_output_is_bounded(ctx: ToolContext) -> None:
    out = await run(ctx, "head -c 20000000 /dev/zero | tr '\\0' b", timeout=60000)
    assert len(out.content) < MAX_OUTPUT_CHARS + 100
    assert f"{20_000_000 - MAX_OUTPUT_CHARS} characters of output omitted" in out.content


def test_command_output_decodes_utf8_split_across_chunks() -> None:
    output = CommandOutput(limit=10, tail_chars=4)
    data = "héllo wörld!".encode()
    for byte in data:
        output.feed(bytes([byte]))
    output.feed(b"", final=True)
    assert output.total == 12
    marker = "\n\n[... 2 characters of output omitted ...]\n\n"
    assert output.text() == "héllo " + marker + "rld!"


async def test_progress_reports_last_lines_at_most_once_a_second(ctx: ToolContext) -> None:
    events: list[dict[str, Any]] = []
    command = "for i in 1 2 3 4 5 6; do echo line$i; sleep 0.4; done"
    out = await BashTool().call(BashInput(command=command), ctx, make_info(events))
    assert out.content.splitlines()[-1] == "line6"
    assert 1 <= len(events) <= 3
    assert events[0]["type"] == "bash_progress"
    assert events[0]["last_lines"][-1].startswith("line")
    assert events[0]["elapsed_ms"] >= 1000


# ----------------------------------------------------------------------------- input and flags


def test_timeout_validation_and_clamp() -> None:
    assert BashInput(command="x", timeout=10_000_000).timeout == MAX_TIMEOUT_MS
    assert BashInput(command="x").timeout is None
    for bad in (0, -5):
        with pytest.raises(ValidationError, match="timeout"):
            BashInput(command="x", timeout=bad)
    with pytest.raises(ValidationError, match="shell"):
        BashInput.model_validate({"command": "x", "shell": "zsh"})
    assert DEFAULT_TIMEOUT_MS == 120_000


def test_schema_uses_claude_code_field_names() -> None:
    schema = BashTool().schema()
    assert schema.name == "Bash"
    assert set(schema.input_schema["properties"]) == {
        "command",
        "timeout",
        "description",
        "run_in_background",
    }
    assert schema.input_schema["required"] == ["command"]


def test_read_only_commands_are_concurrency_safe() -> None:
    tool = BashTool()
    safe, unsafe = BashInput(command="git status && ls -la"), BashInput(command="rm -rf build")
    assert tool.is_read_only(safe) and tool.is_concurrency_safe(safe)
    assert not tool.is_read_only(unsafe) and not tool.is_concurrency_safe(unsafe)


async def test_background_without_service_is_refused(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="Background shells are not available"):
        await run(ctx, "sleep 1", run_in_background=True)


async def test_background_goes_through_the_service_seam(tmp_path: Path) -> None:
    calls: list[tuple[str, ToolContext, str | None]] = []

    class Services:
        async def start_background_shell(
            self, command: str, ctx: ToolContext, description: str | None
        ) -> ToolOutput:
            calls.append((command, ctx, description))
            return ToolOutput(content="started shell bash_1")

    ctx = make_ctx(tmp_path, services=Services())
    out = await run(ctx, "npm run dev", run_in_background=True, description="dev server")
    assert out.content == "started shell bash_1"
    assert calls == [("npm run dev", ctx, "dev server")]
    assert ctx.processes.groups == frozenset()


async def test_one_large_binary_output_reads_the_same_through_bash_and_a_hook(
    ctx: ToolContext, tmp_path: Path
) -> None:
    """Both users of the one pipe reader (``processes.PipeReader``: the Bash tool's feed into
    ``CommandOutput``, a hook's into ``CappedOutput``; and the fallback's readers) on the same
    bytes: 5 MB of seeded random bytes, most of them invalid UTF-8, read in the pipe's own
    chunks. Bash shows what ``CommandOutput`` makes of the whole output fed at once (head,
    marker, tail; the decoder's last bytes flushed); the hook keeps its first
    ``MAX_OUTPUT_BYTES`` of stdout and of stderr and counts the rest."""
    import random

    from subagents.hooks import HookCommand, run_hooks
    from subagents.hooks.runner import MAX_OUTPUT_BYTES

    blob = random.Random(15).randbytes(MAX_OUTPUT_BYTES + 1_000_003) + b"\xe2\x82"  # cut char
    (tmp_path / "blob").write_bytes(blob)
    out = await run(ctx, "cat blob")
    whole = CommandOutput()
    whole.feed(blob)
    whole.feed(b"", final=True)
    assert out.content == whole.text().rstrip("\n") and not out.is_error
    assert out.content.endswith("\ufffd")  # the cut character, flushed at the end
    [hook] = await run_hooks(
        [HookCommand(command="cat blob; cat blob >&2", timeout=60)],
        {},
        cwd=tmp_path,
        env={"PATH": os.defpath},
    )
    note = f"\n[hook output truncated: {len(blob) - MAX_OUTPUT_BYTES:,} more bytes not read]"
    expected = blob[:MAX_OUTPUT_BYTES].decode(errors="replace") + note
    assert (hook.exit_code, hook.stdout, hook.stderr) == (0, expected, expected)
