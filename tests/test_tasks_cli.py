"""`subagents tasks …` and `subagents transcript` against a real project's durable records."""

from __future__ import annotations

import json
import time
from pathlib import Path

from cli_helpers import agent_call, run_cli, run_script, start_script, tool_call, write_script


def background_script(tmp_path: Path, delay_ms: int) -> Path:
    return write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call(
                                "work hard",
                                "Explore",
                                description="long job",
                                run_in_background=True,
                            )
                        ]
                    },
                    {"text": "launched"},
                    {"text": "heard: {{last_user}}"},
                ],
            },
            {
                "agent_type": "Explore",
                "turns": [
                    {"tool_calls": [tool_call("Glob", pattern="*")]},
                    {"text": "the long job result", "delay_ms": delay_ms},
                ],
            },
        ],
    )


def test_list_show_output_and_transcript_after_a_run(tmp_path: Path) -> None:
    script = background_script(tmp_path, 10)
    run = run_script(script, tmp_path)
    assert run.code == 0, run.stderr
    session_id = run.json()["session_id"]

    listed = run_cli("tasks", "list", "--json", cwd=tmp_path)
    assert listed.code == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert len(rows) == 1
    row = rows[0]
    assert set(row) == {
        "id",
        "type",
        "status",
        "description",
        "agentType",
        "sessionId",
        "createdAt",
        "endedAt",
    }
    assert row["status"] == "completed" and row["sessionId"] == session_id
    assert row["agentType"] == "Explore"

    shown = run_cli("tasks", "show", row["id"], "--json", cwd=tmp_path)
    view = json.loads(shown.stdout)
    assert view["lineage"] == {"rootAgentId": row["id"], "resumedFrom": None, "resumeDepth": 0}
    assert "prompt" not in view and "config" not in view and "process" not in view
    assert "projectPath" not in view

    output = run_cli("tasks", "output", row["id"], "--json", cwd=tmp_path)
    assert json.loads(output.stdout) == {
        "id": row["id"],
        "status": "completed",
        "result": "the long job result",
    }
    plain = run_cli("tasks", "output", row["id"], cwd=tmp_path)
    assert plain.stdout == "the long job result\n"

    transcript = run_cli("transcript", row["id"], cwd=tmp_path)
    assert transcript.code == 0
    assert "[user] work hard" in transcript.stdout
    assert "the long job result" in transcript.stdout

    other = tmp_path / "other-project"
    other.mkdir()
    assert json.loads(run_cli("tasks", "list", "--json", cwd=other).stdout) == []
    hidden = run_cli("tasks", "show", row["id"], cwd=other)
    assert hidden.code == 1 and "no task" in hidden.stderr
    refused = run_cli("tasks", "stop", row["id"], cwd=other)
    assert refused.code == 1


def test_stop_from_another_process_reaches_the_owner_within_a_second(tmp_path: Path) -> None:
    script = background_script(tmp_path, 30_000)
    owner = start_script(script, tmp_path)
    try:
        task_id = None
        deadline = time.monotonic() + 20
        while task_id is None:
            assert time.monotonic() < deadline, "the child never appeared"
            rows = json.loads(run_cli("tasks", "list", "--json", cwd=tmp_path).stdout or "[]")
            running = [r for r in rows if r["status"] == "running"]
            task_id = running[0]["id"] if running else None
            time.sleep(0.1)
        started = time.monotonic()
        stop = run_cli("tasks", "stop", task_id, "--json", cwd=tmp_path)
        assert stop.code == 0, stop.stderr
        assert json.loads(stop.stdout)["status"] == "killed"
        # Far below the child's 30 s script: the stop reached the owner, it did not run out. The
        # bound is loose because two CLI start-ups under a loaded machine take seconds.
        assert time.monotonic() - started < 15
        out, _err = owner.communicate(timeout=20)
    finally:
        if owner.poll() is None:
            owner.kill()
    result = json.loads(out)
    assert result["agents"][1]["status"] == "killed"
    assert "<status>killed</status>" in result["result"]


def test_a_dead_owners_running_task_lists_as_interrupted(tmp_path: Path) -> None:
    """Issue 13 item 11: after a SIGKILL, `tasks list` reconciles on read instead of showing
    `running` until the next session starts; PID reuse is not taken for a live owner."""
    import os
    import signal
    import subprocess

    from subagents.state import ProjectState
    from subagents.store.files import FileStore
    from subagents.store.process_identity import ProcessIdentity, hostname, start_identity

    script = background_script(tmp_path, 60_000)
    owner = start_script(script, tmp_path)
    try:
        deadline = time.monotonic() + 20
        rows: list[dict[str, str]] = []
        while not any(r["status"] == "running" for r in rows):
            assert time.monotonic() < deadline, "the child never appeared"
            rows = json.loads(run_cli("tasks", "list", "--json", cwd=tmp_path).stdout or "[]")
            time.sleep(0.1)
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=10)
    finally:
        if owner.poll() is None:
            owner.kill()
    task_id = next(r["id"] for r in rows if r["status"] == "running")
    listed = json.loads(run_cli("tasks", "list", "--json", cwd=tmp_path).stdout)
    assert [r["status"] for r in listed if r["id"] == task_id] == ["interrupted"]
    shown = json.loads(run_cli("tasks", "show", task_id, "--json", cwd=tmp_path).stdout)
    assert shown["status"] == "interrupted"
    text = run_cli("tasks", "list", cwd=tmp_path).stdout
    assert "interrupted" in text and "running" not in text

    store = FileStore(ProjectState.for_cwd(tmp_path))
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        # The PID of a live process, but not the process that owned the task: still interrupted.
        reused = ProcessIdentity(
            pid=stranger.pid, start_identity="1@another-boot", hostname=hostname()
        )
        store.update(task_id, process=reused)
        listed = json.loads(run_cli("tasks", "list", "--json", cwd=tmp_path).stdout)
        assert [r["status"] for r in listed if r["id"] == task_id] == ["interrupted"]
        # The real identity of a live owner: shown as running.
        alive = ProcessIdentity(
            pid=stranger.pid, start_identity=start_identity(stranger.pid), hostname=hostname()
        )
        store.update(task_id, process=alive)
        listed = json.loads(run_cli("tasks", "list", "--json", cwd=tmp_path).stdout)
        assert [r["status"] for r in listed if r["id"] == task_id] == ["running"]
    finally:
        stranger.kill()
        stranger.wait()
