"""The team task list (docs/teams.md "Atomic claims"): rules, and claims raced across processes.

``SUBAGENTS_TEAM_RACE_SEEDS=20`` runs the race with 20 seeds (CI runs 3 in-library and 1
through the CLI).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import recorded, run_script, tool_call, write_script
from subagents.agents.teams.files import TeamError
from subagents.agents.teams.tasks import TaskChange, TaskList, blocked_ids

SEEDS = int(os.environ.get("SUBAGENTS_TEAM_RACE_SEEDS", "3"))
CLI_SEEDS = int(os.environ.get("SUBAGENTS_TEAM_RACE_SEEDS", "1"))
WORKERS, TASKS = 5, 50


def new_list(tmp_path: Path) -> TaskList:
    folder = tmp_path / "tasks"
    folder.mkdir()
    return TaskList(folder)


def claim(tasks: TaskList, task_id: str, by: str) -> dict[str, Any]:
    return tasks.update(task_id, TaskChange(status="in_progress"), by=by, is_lead=False)


def test_one_owner_blockers_and_completion_unblocking(tmp_path: Path) -> None:
    tasks = new_list(tmp_path)
    first, second, third = (tasks.create(f"t{i}", "") for i in range(3))
    assert [first["id"], second["id"], third["id"]] == ["1", "2", "3"]
    tasks.update("2", TaskChange(add_blocked_by=["1"]), by="team-lead", is_lead=True)
    tasks.update("1", TaskChange(add_blocks=["3"]), by="team-lead", is_lead=True)
    assert blocked_ids(tasks.all()) == {"2", "3"}
    with pytest.raises(TeamError, match="blocked by #1"):
        claim(tasks, "2", "a")
    assert claim(tasks, "1", "a")["owner"] == "a"
    with pytest.raises(TeamError, match="already claimed by a"):
        claim(tasks, "1", "b")
    with pytest.raises(TeamError, match="already claimed by a"):
        tasks.update("1", TaskChange(owner="b"), by="b", is_lead=False)
    done = tasks.update("1", TaskChange(status="completed"), by="a", is_lead=False)
    assert done["blocks"] == []
    assert blocked_ids(tasks.all()) == set()
    assert claim(tasks, "2", "b")["owner"] == "b"
    # the lead may reassign
    moved = tasks.update("2", TaskChange(owner="c"), by="team-lead", is_lead=True)
    assert moved["owner"] == "c"


def test_cycles_refused_and_deletion_removes_references(tmp_path: Path) -> None:
    tasks = new_list(tmp_path)
    for i in range(3):
        tasks.create(f"t{i}", "")
    tasks.update("2", TaskChange(add_blocked_by=["1"]), by="team-lead", is_lead=True)
    tasks.update("3", TaskChange(add_blocked_by=["2"]), by="team-lead", is_lead=True)
    with pytest.raises(TeamError, match="cycle"):
        tasks.update("1", TaskChange(add_blocked_by=["3"]), by="team-lead", is_lead=True)
    with pytest.raises(TeamError, match="cycle"):
        tasks.update("1", TaskChange(add_blocks=["1"]), by="team-lead", is_lead=True)
    tasks.update("2", TaskChange(status="deleted"), by="team-lead", is_lead=True)
    remaining = {t["id"]: t for t in tasks.all()}
    assert set(remaining) == {"1", "3"}
    assert remaining["1"]["blocks"] == [] and remaining["3"]["blockedBy"] == []
    assert tasks.create("again", "")["id"] == "4"  # ids are never reused
    with pytest.raises(TeamError, match="not a task id"):
        tasks.get("../x")
    with pytest.raises(TeamError, match="not found"):
        claim(tasks, "99", "a")


def test_released_tasks_go_back_to_pending(tmp_path: Path) -> None:
    tasks = new_list(tmp_path)
    for i in range(3):
        tasks.create(f"t{i}", "")
    claim(tasks, "1", "a")
    claim(tasks, "2", "a")
    tasks.update("2", TaskChange(status="completed"), by="a", is_lead=False)
    assert tasks.release_owned("a") == ["1"]
    first = tasks.get("1")
    assert first is not None and first["owner"] is None and first["status"] == "pending"
    second = tasks.get("2")
    assert second is not None and second["status"] == "completed"


def _race_worker(folder: str, name: str, seed: int, out: Any) -> None:
    tasks = TaskList(Path(folder))
    order = [str(i) for i in range(1, TASKS + 1)]
    random.Random(seed).shuffle(order)
    won = []
    for task_id in order:
        try:
            claim(tasks, task_id, name)
        except TeamError:
            continue
        won.append(task_id)
    out.put((name, won))


@pytest.mark.parametrize("seed", range(SEEDS))
def test_claim_race(tmp_path: Path, seed: int) -> None:
    """5 processes race for 50 tasks: each task is claimed exactly once, and the file agrees."""
    tasks = new_list(tmp_path)
    for i in range(TASKS):
        tasks.create(f"t{i}", "")
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    workers = [
        context.Process(target=_race_worker, args=(str(tasks.folder), f"w{i}", seed * 10 + i, out))
        for i in range(WORKERS)
    ]
    for worker in workers:
        worker.start()
    results = dict(out.get(timeout=60) for _ in workers)
    for worker in workers:
        worker.join(timeout=10)
    claims = [task_id for won in results.values() for task_id in won]
    assert sorted(claims, key=int) == [str(i) for i in range(1, TASKS + 1)]
    owners = {t["id"]: t["owner"] for t in tasks.all()}
    for name, won in results.items():
        assert all(owners[task_id] == name for task_id in won)


@pytest.mark.parametrize("seed", range(CLI_SEEDS))
def test_claim_race_between_teammate_processes(tmp_path: Path, seed: int) -> None:
    """The same race through the CLI: 5 teammate worker processes, 50 claims each."""
    creates = [tool_call("TaskCreate", subject=f"task {i}") for i in range(1, TASKS + 1)]
    spawns = [
        {
            "name": "Agent",
            "input": {
                "description": f"racer {i}",
                "prompt": f"racer r{i}",
                "subagent_type": "general-purpose",
                "team_name": "race",
                "name": f"r{i}",
            },
        }
        for i in range(WORKERS)
    ]
    lead = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [tool_call("TeamCreate", team_name="race")]},
            {"tool_calls": creates},
            {"tool_calls": spawns},
            {"text": "racing"},
            {"tool_calls": [tool_call("TaskList")]},
            {"text": "{{tool_results}}"},
        ],
    }
    racers = []
    for i in range(WORKERS):
        order = list(range(1, TASKS + 1))
        random.Random(seed * 10 + i).shuffle(order)
        calls = [tool_call("TaskUpdate", taskId=str(t), status="in_progress") for t in order]
        racers.append(
            {
                "agent_type": "general-purpose",
                "match": f"racer r{i}$",
                "turns": [{"tool_calls": calls}, {"text": "raced"}],
            }
        )
    script = write_script(tmp_path, [lead, *racers])
    env = {"SUBAGENTS_AGENT_TEAMS": "1"}
    result = run_script(script, tmp_path, env=env, timeout=120)
    assert result.code == 0, result.stderr
    wins: dict[str, list[str]] = {}
    for request in recorded(tmp_path):
        name = request.get("name")
        if name is None or len(request["messages"]) < 3:
            continue
        blocks = request["messages"][-1]["content"]
        for block in blocks:
            if block["type"] == "tool_result" and not block.get("is_error"):
                text = block["content"] if isinstance(block["content"], str) else json.dumps(block)
                wins.setdefault(name, []).append(text.split()[1].lstrip("#"))
    claimed = sorted((t for won in wins.values() for t in won), key=int)
    assert claimed == [str(i) for i in range(1, TASKS + 1)]
    final = result.json()["result"]
    for name, won in wins.items():
        for task_id in won:
            assert f"#{task_id} [in_progress] task {task_id} (owner: {name})" in final
