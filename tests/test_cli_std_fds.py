"""``subagents`` started with a standard descriptor closed (``<&-``, ``2>&-``, ``>&-``): each is
opened on ``/dev/null`` before anything else (``cli/std_fds.py``), so no file or socket of the
run takes its number, an error meant for stderr never lands in stdout, and a stream-json
session on a closed stdin ends as at an EOF."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from cli_helpers import recorded, run_cli, script_args, write_script

SHOW_FDS = "readlink /proc/$PPID/fd/0 /proc/$PPID/fd/2"
"""The Bash tool's parent is the ``subagents`` process: where its descriptors 0 and 2 point."""


def _closing(*fds: int) -> Callable[[], None]:
    def close() -> None:
        for fd in fds:
            os.close(fd)

    return close


def _show_fds_script(tmp_path: Path) -> Path:
    call = {"name": "Bash", "input": {"command": SHOW_FDS}}
    main = {"agent_type": "main", "turns": [{"tool_calls": [call]}, {"text": "done"}]}
    return write_script(tmp_path, [main])


def test_closed_stdin_and_stderr_are_dev_null_not_the_runs_files(tmp_path: Path) -> None:
    script = _show_fds_script(tmp_path)
    mode = ("--permission-mode", "bypassPermissions")
    args = script_args(script, *mode, output_format="json", prompt="go")
    run = run_cli(*args, cwd=tmp_path, preexec_fn=_closing(0, 2))
    assert run.code == 0
    assert run.json()["result"] == "done"
    tool_result = recorded(tmp_path)[-1]["messages"][-1]["content"][0]["content"]
    # Before: asyncio's epoll descriptor took 0 and its wake-up socket took 2.
    assert tool_result.split() == ["/dev/null", "/dev/null"], tool_result


def test_an_error_with_stderr_closed_stays_out_of_the_protocol_stream(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text('{"permissions": ')
    script = write_script(tmp_path, [{"agent_type": "main", "turns": [{"text": "hi"}]}])
    args = script_args(script, "--verbose", output_format="stream-json", prompt="go")
    run = run_cli(*args, cwd=tmp_path, preexec_fn=_closing(2))
    assert run.code == 2
    # Before: print(file=None) wrote "subagents: error: …settings.json…" into stdout.
    assert run.stdout == ""


def test_a_warning_with_stderr_closed_leaves_stdout_all_json(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    rules = {"permissions": {"allow": ["Bash(unclosed"]}}
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps(rules))
    script = write_script(tmp_path, [{"agent_type": "main", "turns": [{"text": "hi"}]}])
    args = script_args(script, "--verbose", output_format="stream-json", prompt="go")
    run = run_cli(*args, cwd=tmp_path, preexec_fn=_closing(2))
    assert run.code == 0
    events = run.events()  # every line parses
    assert events[-1]["type"] == "result" and events[-1]["result"] == "hi"
    assert any(e.get("subtype") == "warning" for e in events), events


def test_a_stream_json_session_on_a_closed_stdin_ends_at_its_eof(tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"agent_type": "main", "turns": [{"text": "hi"}]}])
    args = ["-p", "--model", f"scripted:{script}", "--output-format", "stream-json"]
    run = run_cli(*args, "--input-format", "stream-json", cwd=tmp_path, preexec_fn=_closing(0))
    assert run.code == 0, run.stderr  # before: a traceback on sys.stdin.buffer, exit 1
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "requests.jsonl").exists()  # no message, no model call


def test_a_prompt_expected_on_a_closed_stdin_gets_the_usage(tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"agent_type": "main", "turns": [{"text": "hi"}]}])
    run = run_cli("-p", "--model", f"scripted:{script}", cwd=tmp_path, preexec_fn=_closing(0))
    assert run.code == 2
    assert "usage: subagents" in run.stderr
