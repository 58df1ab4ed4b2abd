"""Agent teams through the CLI and the scripted model (issue 22, docs/teams.md).

A real lead process, real teammate worker processes (one OS process each), one script file they
all read, one record file they all append to, real hooks from the project's settings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cli_helpers import recorded, run_cli, run_script, tool_call, write_script

TEAMS_ENV = {"SUBAGENTS_AGENT_TEAMS": "1", "SUBAGENTS_AUTO_BACKGROUND_MS": "0"}


def spawn(name: str, prompt: str, agent_type: str = "general-purpose") -> dict[str, Any]:
    return {
        "name": "Agent",
        "input": {
            "description": f"teammate {name}",
            "prompt": prompt,
            "subagent_type": agent_type,
            "team_name": "alpha",
            "name": name,
        },
    }


def work(ids: range) -> list[dict[str, Any]]:
    """Claim then complete each task, in order (task tools run one at a time)."""
    calls = []
    for task_id in ids:
        calls.append(tool_call("TaskUpdate", taskId=str(task_id), status="in_progress"))
        calls.append(tool_call("TaskUpdate", taskId=str(task_id), status="completed"))
    return calls


SHUTDOWN_OK = {
    "capture": {"rid": 'request_id="([^"]+)"'},
    "tool_calls": [
        tool_call(
            "SendMessage",
            to="team-lead",
            message='{"type": "shutdown_response", "request_id": "{{capture.rid}}", '
            '"approve": true}',
        )
    ],
}


def stop_then_delete(to: str, last: str = "{{tool_results}}") -> list[dict[str, Any]]:
    """The lead's closing turns: ask ``to`` to shut down, then delete the team."""
    return [
        {"tool_calls": [tool_call("SendMessage", to=to, message={"type": "shutdown_request"})]},
        {"text": "asked"},
        {"tool_calls": [tool_call("TeamDelete")]},
        {"text": last},
    ]


def teammate(name: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "agent_type": "general-purpose",
        "match": f"you are {name}\\b",
        "turns": [{"tool_calls": calls}, {"text": f"{name} done"}, SHUTDOWN_OK, {"text": "bye"}],
    }


def hook_settings(folder: Path, log: Path) -> None:
    """Every team-relevant hook appends its JSON input to ``log``; TaskCreated refuses
    subjects with 'forbidden' (exit 2)."""
    # One append per input (hooks of several processes write at once).
    logger = {"type": "command", "command": f"line=$(cat); printf '%s\\n' \"$line\" >> {log}"}
    refuse = {
        "type": "command",
        "command": "grep -q forbidden && { echo 'no forbidden work' >&2; exit 2; }; exit 0",
    }
    events = ("SubagentStart", "SubagentStop", "TeammateIdle", "TaskCreated")
    hooks: dict[str, Any] = {event: [{"hooks": [logger]}] for event in events}
    hooks["TaskCreated"] = [{"hooks": [logger, refuse]}]
    (folder / ".claude").mkdir()
    (folder / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))


def worker_processes(marker: str) -> list[int]:
    """Live processes running a teammate worker whose command line mentions ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if "teammate-worker" in cmdline and marker in cmdline and state not in "ZX":
            found.append(int(entry.name))
    return found


def last_text(request: dict[str, Any]) -> str:
    content = request["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if block["type"] == "text":
            parts.append(block["text"])
        elif block["type"] == "tool_result":
            inner = block["content"]
            parts.append(inner if isinstance(inner, str) else json.dumps(inner))
    return "\n".join(parts)


def test_team_of_three_works_a_blocked_task_list_and_shuts_down(tmp_path: Path) -> None:
    home = Path(os.environ["SUBAGENTS_HOME"])
    hook_log = tmp_path / "hooks.log"
    hook_settings(tmp_path, hook_log)
    creates = [tool_call("TaskCreate", subject=f"task {i}") for i in range(1, 21)]
    creates.append(tool_call("TaskCreate", subject="forbidden task"))
    links = [
        tool_call("TaskUpdate", taskId=str(i), addBlockedBy=[str(i - 7)]) for i in range(8, 15)
    ]
    links += [
        tool_call("TaskUpdate", taskId=str(i), addBlockedBy=[str(i - 14)]) for i in range(15, 21)
    ]
    lead = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [tool_call("TeamCreate", team_name="alpha", description="demo")]},
            {"tool_calls": creates},
            {"tool_calls": links},
            {"tool_calls": [spawn("w1", "you are w1")]},
            {"text": "waiting for w1"},
            {"tool_calls": [spawn("w2", "you are w2"), spawn("w3", "you are w3")]},
            {"text": "waiting for w2 and w3"},
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
    # w1 first tries a task blocked by its own unfinished work: refused.
    w1 = teammate(
        "w1", [tool_call("TaskUpdate", taskId="8", status="in_progress"), *work(range(1, 8))]
    )
    script = write_script(
        tmp_path,
        [lead, w1, teammate("w2", work(range(8, 15))), teammate("w3", work(range(15, 21)))],
    )
    result = run_script(script, tmp_path, env=TEAMS_ENV, timeout=90)
    assert result.code == 0, result.stderr
    payload = result.json()
    assert (
        payload["result"] == "done: Team 'alpha' deleted (config, mailboxes and task list removed)."
    )

    requests = recorded(tmp_path)  # every line parsed: no interleaved writes
    by_name: dict[str | None, list[dict[str, Any]]] = {}
    for request in requests:
        by_name.setdefault(request.get("name"), []).append(request)
    assert sorted(n for n in by_name if n) == ["w1", "w2", "w3"]
    for name in ("w1", "w2", "w3"):
        mine = by_name[name]
        assert {r["team_name"] for r in mine} == {"alpha"}
        assert {r["agent_type"] for r in mine} == {"general-purpose"}
        assert len({r["agent_id"] for r in mine}) == 1 and mine[0]["agent_id"].startswith("t")
        tool_names = {t["name"] for t in mine[0]["tools"]}
        assert {"TaskCreate", "TaskUpdate", "TaskList", "TaskGet", "SendMessage"} <= tool_names
        assert not {"TeamCreate", "TeamDelete", "Agent"} & tool_names
        # every claim and completion succeeded (w1's first, blocked claim aside)
        results = last_text(mine[1])
        assert results.count("updated: completed") == 7 if name != "w3" else 6
        # the broadcast reached it as a structured shutdown request
        assert 'type="shutdown_request"' in last_text(mine[2])
    assert last_text(by_name["w1"][1]).startswith("Task #8 is blocked by #1")

    main = by_name[None]
    created = last_text(main[2])
    assert "TaskCreated hook refused the task (deleted): no forbidden work" in created
    assert 'from="w1" type="idle_notification" summary="w1 done"' in last_text(main[5])
    woken = last_text(main[7])  # the lead hears w2 and w3 once both are idle: one batch
    assert woken.count("idle_notification") == 2
    task_list = last_text(main[8]).split("Message sent")[0]
    assert task_list.count("[completed]") == 20 and "forbidden" not in task_list
    for i in range(1, 21):
        owner = "w1" if i <= 7 else "w2" if i <= 14 else "w3"
        assert f"#{i} [completed] task {i} (owner: {owner})" in task_list
    responses = last_text(main[9])
    assert responses.count('type="shutdown_response"') == 3
    assert responses.count('approve="true"') == 3

    hooks = [json.loads(line) for line in hook_log.read_text().splitlines() if line.strip()]
    teammate_ids = {by_name[n][0]["agent_id"]: n for n in ("w1", "w2", "w3")}
    for agent_id in teammate_ids:
        starts = [
            h
            for h in hooks
            if h["hook_event_name"] == "SubagentStart" and h["agent_id"] == agent_id
        ]
        stops = [
            h for h in hooks if h["hook_event_name"] == "SubagentStop" and h["agent_id"] == agent_id
        ]
        assert len(starts) == 1 and len(stops) == 1, (agent_id, starts, stops)
    idle = [h for h in hooks if h["hook_event_name"] == "TeammateIdle"]
    assert {h["teammate_name"] for h in idle} == {"w1", "w2", "w3"}
    assert {h["team_name"] for h in idle} == {"alpha"}
    created_hooks = [h for h in hooks if h["hook_event_name"] == "TaskCreated"]
    assert len(created_hooks) == 21 and created_hooks[0]["task_subject"] == "task 1"

    assert worker_processes(str(home)) == []
    listed = run_cli("teams", "list", "--json", cwd=tmp_path)
    assert listed.code == 0 and json.loads(listed.stdout) == []


def test_teams_cli_lists_shows_and_deletes(tmp_path: Path) -> None:
    lead = {
        "agent_type": "main",
        "turns": [
            {
                "tool_calls": [
                    tool_call("TeamCreate", team_name="beta", description="the beta team"),
                ]
            },
            {"tool_calls": [tool_call("TaskCreate", subject="write docs")]},
            {"text": "left the team in place"},
        ],
    }
    script = write_script(tmp_path, [lead])
    assert run_script(script, tmp_path, env=TEAMS_ENV).code == 0
    listed = run_cli("teams", "list", "--json", cwd=tmp_path)
    rows = json.loads(listed.stdout)
    assert [(r["name"], r["description"], r["tasks"], r["members"]) for r in rows] == [
        ("beta", "the beta team", 1, 0)
    ]
    shown = json.loads(run_cli("teams", "show", "beta", "--json", cwd=tmp_path).stdout)
    assert shown["members"][0]["name"] == "team-lead"
    assert set(shown) >= {"name", "description", "createdAt", "leadAgentId", "leadSessionId"}
    assert [t["subject"] for t in shown["tasks"]] == ["write docs"]
    text = run_cli("teams", "list", cwd=tmp_path).stdout
    assert "beta\t0/0 active\t0/1 tasks done\tthe beta team" in text
    missing = run_cli("teams", "show", "nope", cwd=tmp_path)
    assert missing.code == 1 and "No team named 'nope'" in missing.stderr
    bad = run_cli("teams", "show", "../etc", cwd=tmp_path)
    assert bad.code == 1 and "team_name '../etc' is not valid" in bad.stderr
    deleted = run_cli("teams", "delete", "beta", "--json", cwd=tmp_path)
    assert deleted.code == 0 and json.loads(deleted.stdout) == {"deleted": "beta"}
    assert json.loads(run_cli("teams", "list", "--json", cwd=tmp_path).stdout) == []


def test_team_tools_are_off_unless_enabled(tmp_path: Path) -> None:
    lead = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [spawn("w1", "you are w1")]},
            {"text": "{{tool_results}}"},
        ],
    }
    script = write_script(tmp_path, [lead])
    result = run_script(script, tmp_path)
    assert result.code == 0, result.stderr
    assert "Teams are not available in this session" in result.json()["result"]
    names = {t["name"] for t in recorded(tmp_path)[0]["tools"]}
    assert not {"TeamCreate", "TaskCreate"} & names


def one_task_lead() -> dict[str, Any]:
    """A lead that creates team alpha with one task, spawns w1, waits, asks it to shut down
    and deletes the team."""
    return {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [tool_call("TeamCreate", team_name="alpha")]},
            {"tool_calls": [tool_call("TaskCreate", subject="only task")]},
            {"tool_calls": [spawn("w1", "you are w1")]},
            {"text": "waiting"},
            *stop_then_delete("w1"),
        ],
    }


def test_in_process_teammate_on_request(tmp_path: Path) -> None:
    """``SUBAGENTS_TEAMMATE_MODE=in-process``: the same team, the teammate a task of the lead's
    process (no worker process), the same metadata, claims, idle and shutdown handshake."""
    script = write_script(tmp_path, [one_task_lead(), teammate("w1", work(range(1, 2)))])
    env = {**TEAMS_ENV, "SUBAGENTS_TEAMMATE_MODE": "in-process"}
    result = run_script(script, tmp_path, env=env, timeout=60)
    assert result.code == 0, result.stderr
    assert result.json()["result"].startswith("Team 'alpha' deleted")
    requests = recorded(tmp_path)
    mine = [r for r in requests if r.get("name") == "w1"]
    assert len(mine) == 4 and {r["team_name"] for r in mine} == {"alpha"}
    assert "Task #1 updated: completed, owner w1" in last_text(mine[1])
    main = [r for r in requests if r["agent_type"] == "main"]
    assert 'type="idle_notification"' in last_text(main[4])
    assert 'type="shutdown_response"' in last_text(main[6])
    assert "notification" not in last_text(main[6]).replace("idle_notification", "")


def test_teammates_cannot_nest_and_team_events_are_streamed(tmp_path: Path) -> None:
    """A teammate whose definition lists Agent still cannot spawn a teammate (name, team_name,
    mode refused) and holds no TeamCreate; team_created / team_deleted are stream-json events."""
    agents = {
        "coordinator": {
            "description": "coordinates",
            "prompt": "You coordinate.",
            "tools": ["Agent", "TaskList", "Read"],
        }
    }
    nested = {
        "name": "Agent",
        "input": {"description": "nest", "prompt": "x", "team_name": "alpha", "name": "w9"},
    }
    lead = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [tool_call("TeamCreate", team_name="alpha")]},
            {"tool_calls": [spawn("c1", "you are c1", agent_type="coordinator")]},
            {"text": "waiting"},
            *stop_then_delete("c1", "done"),
        ],
    }
    member = {
        "agent_type": "coordinator",
        "turns": [{"tool_calls": [nested]}, {"text": "c1 done"}, SHUTDOWN_OK, {"text": "bye"}],
    }
    script = write_script(tmp_path, [lead, member])
    result = run_script(
        script,
        tmp_path,
        "--agents",
        json.dumps(agents),
        output_format="stream-json",
        env=TEAMS_ENV,
        timeout=60,
    )
    assert result.code == 0, result.stderr
    events = result.events()
    created = [e for e in events if e.get("subtype") == "team_created"]
    deleted = [e for e in events if e.get("subtype") == "team_deleted"]
    assert created[0]["team_name"] == "alpha" and created[0]["lead_agent_type"] == "main"
    assert deleted[0]["team_name"] == "alpha" and deleted[0]["teammate_count"] == 1
    mine = [r for r in recorded(tmp_path) if r.get("name") == "c1"]
    tools = {t["name"] for t in mine[0]["tools"]}
    assert "Agent" in tools and not {"TeamCreate", "TeamDelete"} & tools
    agent_schema = next(t for t in mine[0]["tools"] if t["name"] == "Agent")
    assert "team_name" not in agent_schema["input_schema"]["properties"]
    refusal = last_text(mine[1])
    assert "cannot be used inside a teammate" in refusal
