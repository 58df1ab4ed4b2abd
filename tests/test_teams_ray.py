"""Teammates on Ray (issue 24 Build 1, docs/distributed.md "Teammates on Ray"): with
``SUBAGENTS_EXECUTOR=ray`` a teammate's worker process is started by a ``ChildHost`` actor on
its node (``TeammateLauncher``), not by the lead. The team works as on one machine — shared task
list, mailboxes, the shutdown handshake — and a teammate whose host dies is reported to the lead
once, its task released, its record failed, no worker left behind."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from cli_helpers import (
    recorded,
    run_cli,
    run_script,
    start_script,
    tool_call,
    wait_until_dead,
    write_script,
)
from subagents.testing.pg_cluster import PgCluster
from subagents.testing.ray_cluster import RayCluster
from test_teams_crash import SLOW_WORKER, config_pid, wait_for
from test_teams_e2e import last_text, spawn, teammate, work, worker_processes


def _env(ray_cluster: RayCluster, url: str) -> dict[str, str]:
    return {
        **ray_cluster.env(),
        "SUBAGENTS_EXECUTOR": "ray",
        "SUBAGENTS_STORE": url,
        "SUBAGENTS_AGENT_TEAMS": "1",
        "SUBAGENTS_RAY_HOSTS": "1",
    }


def _requests(folder: Path, name: str) -> list[dict[str, Any]]:
    """The recorded requests of teammate ``name`` so far (a line being written is skipped)."""
    path = folder / "requests.jsonl"
    found = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            request = json.loads(line)
        except json.JSONDecodeError:
            continue
        if request.get("name") == name:
            found.append(request)
    return found


def _parent(pid: int) -> tuple[int, str]:
    """The parent's pid and command line."""
    ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return ppid, Path(f"/proc/{ppid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_teammates_on_ray_work_the_task_list_and_shut_down(
    tmp_path: Path, pg_cluster: PgCluster, ray_cluster: RayCluster
) -> None:
    lead: dict[str, Any] = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [tool_call("TeamCreate", team_name="alpha", description="on Ray")]},
            {"tool_calls": [tool_call("TaskCreate", subject=f"task {i}") for i in (1, 2, 3, 4)]},
            {"tool_calls": [spawn("w1", "you are w1"), spawn("w2", "you are w2")]},
            {"text": "waiting"},
            {
                "tool_calls": [
                    tool_call("TaskList"),
                    tool_call("SendMessage", to="*", message={"type": "shutdown_request"}),
                ]
            },
            {"text": "asked everyone to stop"},
            {"tool_calls": [tool_call("TeamDelete")]},
            {"text": "done: {{tool_results}}"},
        ],
    }
    w1 = teammate("w1", work(range(1, 3)))
    w2 = teammate("w2", work(range(3, 5)))
    script = write_script(tmp_path, [lead, w1, w2])
    proc = start_script(script, tmp_path, env=_env(ray_cluster, pg_cluster.fresh_url()))
    wait_for(lambda: len(_requests(tmp_path, "w1")) >= 1, timeout_s=180)
    worker = config_pid(tmp_path, "alpha", "w1")
    ppid, parent = _parent(worker)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-3000:]
    assert ppid != proc.pid and "ray::" in parent, (ppid, parent)  # started by a Ray host
    assert json.loads(out)["result"] == (
        "done: Team 'alpha' deleted (config, mailboxes and task list removed)."
    )
    for name in ("w1", "w2"):
        mine = [r for r in recorded(tmp_path) if r.get("name") == name]
        assert last_text(mine[1]).count("updated: completed") == 2, last_text(mine[1])
        assert 'type="shutdown_request"' in last_text(mine[2])
    assert worker_processes(os.environ["SUBAGENTS_HOME"]) == []


def test_a_teammate_whose_ray_host_dies_is_reported_once_and_its_task_released(
    tmp_path: Path, pg_cluster: PgCluster, ray_cluster: RayCluster
) -> None:
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
    script = write_script(tmp_path, [lead, SLOW_WORKER])
    env = _env(ray_cluster, pg_cluster.fresh_url())
    proc = start_script(script, tmp_path, env=env)
    wait_for(lambda: len(_requests(tmp_path, "w1")) >= 2, timeout_s=180)  # claimed
    worker = config_pid(tmp_path, "alpha", "w1")
    host, parent = _parent(worker)
    assert host != proc.pid and "ray::" in parent, (host, parent)
    os.kill(host, signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    result = json.loads(out)["result"]
    assert result.startswith("#1 [pending] task 1") and "owner" not in result, result
    main = [r for r in recorded(tmp_path) if r["agent_type"] == "main"]
    everything = json.dumps(main[-1]["messages"])
    assert everything.count("without shutting down") == 1, (
        "the lead was told more or less than once"
    )
    assert "released for others to claim: #1" in everything
    teammate_id = _requests(tmp_path, "w1")[0]["agent_id"]
    shown = run_cli("tasks", "show", teammate_id, "--json", cwd=tmp_path, env=env)
    assert shown.code == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "failed", shown.stdout
    assert worker_processes(os.environ["SUBAGENTS_HOME"]) == []


def test_a_killed_leads_teammate_on_ray_ends_with_its_host_and_a_resumed_lead_cleans_up(
    tmp_path: Path, pg_cluster: PgCluster, ray_cluster: RayCluster
) -> None:
    """kill -9 of the lead: Ray ends its host actor, and an exiting Ray worker kills its direct
    child processes — the teammate ends with it (no orphan). Its claimed task waits for the
    resumed lead, which releases it (``TeamHost.rejoin``) and can delete the team."""
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
    script = write_script(tmp_path, [first, cleanup, SLOW_WORKER])
    env = _env(ray_cluster, pg_cluster.fresh_url())
    proc = start_script(script, tmp_path, env=env)
    wait_for(lambda: len(_requests(tmp_path, "w1")) >= 2, timeout_s=180)  # claimed
    worker = config_pid(tmp_path, "alpha", "w1")
    host, _ = _parent(worker)
    session_id = recorded(tmp_path)[0]["agent_id"]
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert wait_until_dead(host, timeout_s=20), "the host actor outlived its lead"
    assert wait_until_dead(worker, timeout_s=20), "the teammate outlived its lead"
    assert worker_processes(os.environ["SUBAGENTS_HOME"]) == []
    resumed = run_script(
        script, tmp_path, "--resume", session_id, prompt="cleanup", env=env, timeout=120
    )
    assert resumed.code == 0, resumed.stderr
    text = resumed.json()["result"]
    assert "#1 [pending] task 1" in text and "Team 'alpha' deleted" in text, text
