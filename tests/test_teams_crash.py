"""kill -9 in a team (issue 22 item 8, docs/teams.md "Crashes"): a teammate killed mid-task, and
the lead killed while its teammate works. Real processes, real signals."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import recorded, run_cli, run_script, start_script, tool_call, wait_until_dead
from subagents.state import ProjectState
from test_teams_e2e import hook_settings, last_text, spawn, worker_processes


def wait_for(predicate: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def teammate_requests(folder: Path, name: str) -> list[dict[str, Any]]:
    path = folder / "requests.jsonl"
    if not path.exists():
        return []
    return [r for r in recorded(folder) if r.get("name") == name]


def member(folder: Path, team: str, name: str) -> dict[str, Any]:
    shown = run_cli("teams", "show", team, "--json", cwd=folder)
    assert shown.code == 0, shown.stderr
    found: dict[str, Any] = next(
        m for m in json.loads(shown.stdout)["members"] if m["name"] == name
    )
    return found


def config_pid(folder: Path, team: str, name: str) -> int:
    """The teammate's pid as its lead recorded it (read straight from the config file)."""
    state = ProjectState.for_cwd(folder)
    path = state.root / "teams" / team / "config.json"
    config = json.loads(path.read_text())
    pid = next(m.get("pid") for m in config["members"] if m["name"] == name)
    assert isinstance(pid, int)
    return pid


SLOW_WORKER = {
    "agent_type": "general-purpose",
    "match": "you are w1",
    "turns": [
        {"tool_calls": [tool_call("TaskUpdate", taskId="1", status="in_progress")]},
        {"delay_ms": 60_000, "text": "never reached"},
    ],
}


def test_teammate_killed_mid_task_releases_it_and_tells_the_lead_once(tmp_path: Path) -> None:
    hook_log = tmp_path / "hooks.log"
    hook_settings(tmp_path, hook_log)
    lead = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [tool_call("TeamCreate", team_name="alpha")]},
            {"tool_calls": [tool_call("TaskCreate", subject="task 1")]},
            {"tool_calls": [spawn("w1", "you are w1")]},
            {"text": "waiting"},
            {"tool_calls": [tool_call("TaskList")]},
            {"text": "{{tool_results}}"},
        ],
    }
    script_path = tmp_path / "script.json"
    script_path.write_text(json.dumps({"record": "requests.jsonl", "agents": [lead, SLOW_WORKER]}))
    os.environ["SUBAGENTS_AGENT_TEAMS"] = "1"
    try:
        proc = start_script(script_path, tmp_path)
        wait_for(lambda: len(teammate_requests(tmp_path, "w1")) >= 2)  # claimed, now working
        pid = config_pid(tmp_path, "alpha", "w1")
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        del os.environ["SUBAGENTS_AGENT_TEAMS"]
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert result["result"].startswith("#1 [pending] task 1"), result["result"]
    assert "owner" not in result["result"]
    main = [r for r in recorded(tmp_path) if r["agent_type"] == "main"]
    notice = last_text(main[4])
    assert "Teammate w1" in notice and "was killed by signal 9" in notice
    assert "released for others to claim: #1" in notice
    everything = json.dumps(main[-1]["messages"])
    assert everything.count("was killed by signal 9") == 1  # told once
    teammate_id = teammate_requests(tmp_path, "w1")[0]["agent_id"]
    shown = run_cli("tasks", "show", teammate_id, "--json", cwd=tmp_path)
    assert json.loads(shown.stdout)["status"] == "failed"
    hooks = [json.loads(line) for line in hook_log.read_text().splitlines() if line.strip()]
    events = [h["hook_event_name"] for h in hooks if h.get("agent_id") == teammate_id]
    assert events.count("SubagentStart") == 1 and events.count("SubagentStop") == 1
    assert worker_processes(os.environ["SUBAGENTS_HOME"]) == []


def test_lead_killed_its_teammate_stops_and_a_resumed_lead_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_AGENT_TEAMS", "1")
    first = {
        "agent_type": "main",
        "match": "^go$",
        "turns": [
            {"tool_calls": [tool_call("TeamCreate", team_name="alpha")]},
            {"tool_calls": [tool_call("TaskCreate", subject="task 1")]},
            {"tool_calls": [spawn("w1", "you are w1")]},
            {"text": "waiting"},
        ],
    }
    cleanup = {
        "agent_type": "main",
        "match": "^cleanup$",
        "turns": [
            {"tool_calls": [tool_call("TaskList"), tool_call("TeamDelete")]},
            {"text": "{{tool_results}}"},
        ],
    }
    script_path = tmp_path / "script.json"
    agents = [first, cleanup, SLOW_WORKER]
    script_path.write_text(json.dumps({"record": "requests.jsonl", "agents": agents}))
    proc = start_script(script_path, tmp_path)
    wait_for(lambda: len(teammate_requests(tmp_path, "w1")) >= 2)
    worker = config_pid(tmp_path, "alpha", "w1")
    session_id = recorded(tmp_path)[0]["agent_id"]
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert wait_until_dead(worker, timeout_s=20), "the teammate outlived its lead"
    assert worker_processes(os.environ["SUBAGENTS_HOME"]) == []
    assert member(tmp_path, "alpha", "w1")["isActive"] is False
    shown = json.loads(run_cli("teams", "show", "alpha", "--json", cwd=tmp_path).stdout)
    assert shown["tasks"][0]["status"] == "pending" and shown["tasks"][0]["owner"] is None
    resumed = run_script(
        script_path, tmp_path, "--resume", session_id, prompt="cleanup", timeout=60
    )
    assert resumed.code == 0, resumed.stderr
    text = resumed.json()["result"]
    assert "#1 [pending] task 1" in text and "Team 'alpha' deleted" in text
    assert json.loads(run_cli("teams", "list", "--json", cwd=tmp_path).stdout) == []
