"""``subagents -p`` whose standard output is closed under it (``| head``, a reader that died):
no traceback, no model call for a reader that is gone, one line on stderr saying what happened
and how to continue, exit 141, and the session saved and resumable (``cli/stdout_guard.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cli_helpers import recorded, run_script, script_args, write_script


def main_agent(*turns: dict[str, object]) -> dict[str, object]:
    return {"agent_type": "main", "turns": list(turns)}


def _run_into_closed_pipe(
    args: list[str], cwd: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The command with its stdout a pipe whose reader is already gone."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "subagents", *args],
            cwd=cwd,
            input=stdin,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)


def _three_calls(tmp_path: Path) -> Path:
    return write_script(
        tmp_path,
        [
            main_agent(
                {"tool_calls": [{"name": "Glob", "input": {"pattern": "*.py"}}]},
                {"tool_calls": [{"name": "Glob", "input": {"pattern": "*.md"}}]},
                {"text": "done"},
            )
        ],
    )


def test_a_closed_stream_stops_the_run_and_it_resumes(tmp_path: Path) -> None:
    script = _three_calls(tmp_path)
    args = script_args(script, output_format="stream-json", prompt="go")
    proc = _run_into_closed_pipe([*args, "--verbose"], tmp_path)
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "broken pipe" in line]
    assert len(lines) == 1 and "the run stopped" in lines[0], proc.stderr
    session_id = lines[0].split("--resume ")[1].split("`")[0]
    # The init line failed to write: the run was aborted before its model calls were spent.
    requests = recorded(tmp_path) if (tmp_path / "requests.jsonl").exists() else []
    assert len(requests) < 3
    resumed = run_script(script, tmp_path, "--resume", session_id, prompt="go on")
    assert resumed.code == 0, resumed.stderr
    assert resumed.json()["session_id"] == session_id


def test_a_result_that_cannot_be_written_is_reported_and_saved(tmp_path: Path) -> None:
    script = _three_calls(tmp_path)
    proc = _run_into_closed_pipe(script_args(script, output_format="json", prompt="go"), tmp_path)
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "standard output was closed (broken pipe): before the result was written" in (
        proc.stderr
    )
    assert len(recorded(tmp_path)) == 3  # json writes only the result: the run went to its end


def test_an_sdk_session_whose_reader_went_away_ends(tmp_path: Path) -> None:
    script = _three_calls(tmp_path)
    args = ["-p", "--model", f"scripted:{script}", "--output-format", "stream-json"]
    args += ["--input-format", "stream-json"]
    user = '{"type":"user","message":{"role":"user","content":"go"}}\n'
    proc = _run_into_closed_pipe(args, tmp_path, stdin=user)
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "standard output was closed (broken pipe)" in proc.stderr


def test_a_stdout_closed_from_the_start_is_reported(tmp_path: Path) -> None:
    script = _three_calls(tmp_path)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "subagents",
            *script_args(script, output_format="json", prompt="go"),
        ],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: os.close(1),  # `subagents … >&-`
    )
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "standard output was closed (broken pipe): before the result was written" in (
        proc.stderr
    )
