"""Synchronous sub-agents through the real CLI (issue 3 "Done when")."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import cli_helpers
from cli_helpers import (
    pid_alive,
    recorded,
    run_script,
    start_script,
    wait_until_dead,
    write_script,
)


def agent_call(prompt: str, subagent_type: str = "Explore", **extra: Any) -> dict[str, Any]:
    return cli_helpers.agent_call(prompt, subagent_type, description="probe", **extra)


def test_five_parallel_children_report_to_the_coordinator(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("content\n")
    tokens = ["T1", "T2", "T3", "T4", "T5"]
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call(f"token {t}") for t in tokens]},
                    {"text": "merged:\n{{tool_results}}"},
                ],
            },
            {
                "agent_type": "Explore",
                "match": r"token (\w+)",
                "turns": [
                    {
                        "tool_calls": [{"name": "Glob", "input": {"pattern": "*.txt"}}],
                        "delay_ms": 50,
                    },
                    {
                        "text": "child saw {{match.1}}",
                        "usage": {
                            "input_tokens": 100,
                            "output_tokens": 7,
                            "cache_read_input_tokens": 20,
                            "cache_creation_input_tokens": 3,
                        },
                    },
                ],
            },
        ],
    )
    started = time.monotonic()
    run = run_script(script, tmp_path, prompt="fan out")
    assert run.code == 0, run.stderr
    result = run.json()
    for token in tokens:
        assert f"child saw {token}" in result["result"]
    children = result["agents"][1:]
    assert len(children) == 5
    assert {c["agentType"] for c in children} == {"Explore"}
    assert all(c["status"] == "completed" and c["totalToolUseCount"] == 1 for c in children)
    # Accounting: session usage equals the sum over agents, cache tokens included.
    usage_total = sum(result["usage"].values())
    assert usage_total == sum(a["totalTokens"] for a in result["agents"])
    assert result["usage"]["cache_read_input_tokens"] >= 5 * 20
    # Parallel: five children with 50 ms model delays do not take 5x as long.
    assert time.monotonic() - started < 30


def test_child_tools_lack_agent_and_explore_cannot_write(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("try writing")]},
                    {"text": "{{tool_results}}"},
                ],
            },
            {
                "agent_type": "Explore",
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "Write", "input": {"file_path": "x.txt", "content": "no"}},
                            {"name": "Bash", "input": {"command": "touch y.txt"}},
                            {"name": "Agent", "input": {"description": "nest", "prompt": "p"}},
                        ]
                    },
                    {"text": "write said: {{tool_results}}"},
                ],
            },
        ],
    )
    run = run_script(script, tmp_path)
    assert run.code == 0, run.stderr
    requests = recorded(tmp_path)
    child = [r for r in requests if r["agent_type"] == "Explore"][0]
    names = [t["name"] for t in child["tools"]]
    assert "Agent" not in names and "Write" not in names and "Edit" not in names
    main = [r for r in requests if r["agent_type"] == "main"][0]
    assert "Agent" in [t["name"] for t in main["tools"]]
    assert not (tmp_path / "x.txt").exists()
    assert not (tmp_path / "y.txt").exists()
    report = run.json()["result"]
    assert "No such tool available: Write" in report
    assert "read-only agent" in report
    assert "No such tool available: Agent" in report


def test_project_definition_overrides_builtin_but_not_verification(tmp_path: Path) -> None:
    agents_dir = tmp_path / ".claude" / "agents"
    agents_dir.mkdir(parents=True)
    (agents_dir / "explore.md").write_text(
        "---\nname: Explore\ndescription: project explorer\ntools: Read\n---\nPROJECT EXPLORE BODY\n"
    )
    (agents_dir / "verify.md").write_text(
        "---\nname: verification\ndescription: fake\n---\nFAKE VERIFIER\n"
    )
    (agents_dir / "broken.md").write_text("---\nname: [unclosed\n---\nbody\n")
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call("a"),
                            agent_call("b", subagent_type="verification"),
                        ]
                    },
                    {"text": "ok"},
                ],
            },
            {"agent_type": "Explore", "turns": [{"text": "explored"}]},
            {"agent_type": "verification", "turns": [{"text": "VERDICT: PASS"}]},
        ],
    )
    run = run_script(script, tmp_path, output_format="text")
    assert run.code == 0, run.stderr
    assert "broken.md" in run.stderr, "a broken definition is reported"
    assert "verify.md" in run.stderr and "reserved" in run.stderr
    requests = recorded(tmp_path)
    explore = [r for r in requests if r["agent_type"] == "Explore"][0]
    assert "PROJECT EXPLORE BODY" in explore["system"]
    assert [t["name"] for t in explore["tools"]] == ["Read"]
    verifier = [r for r in requests if r["agent_type"] == "verification"][0]
    assert "FAKE VERIFIER" not in verifier["system"]


def test_unknown_type_lists_known_types_and_type_matching_is_loose(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call("x", subagent_type="Nonexistent"),
                            agent_call("y", subagent_type="general_purpose"),
                        ]
                    },
                    {"text": "{{tool_results}}"},
                ],
            },
            {"agent_type": "general-purpose", "turns": [{"text": "gp here"}]},
        ],
    )
    run = run_script(script, tmp_path)
    assert run.code == 0, run.stderr
    text = run.json()["result"]
    assert "Agent type 'Nonexistent' not found" in text
    assert "Explore" in text and "general-purpose" in text
    assert "gp here" in text


def nesting_agents(depth_env: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    nester = {"nester": {"description": "nests", "prompt": "You nest.", "tools": ["Agent", "Glob"]}}
    agents = [
        {
            "agent_type": "main",
            "turns": [
                {"tool_calls": [agent_call("level 1", subagent_type="nester")]},
                {"text": "top: {{tool_results}}"},
            ],
        },
        {
            "agent_type": "nester",
            "turns": [
                {"tool_calls": [agent_call("deeper", subagent_type="nester")]},
                {"text": "nested result: {{tool_results}}"},
            ],
        },
    ]
    return agents, {"SUBAGENTS_MAX_SPAWN_DEPTH": depth_env, "AGENTS": json.dumps(nester)}


def test_depth_limit_refuses_with_documented_text(tmp_path: Path) -> None:
    agents, env = nesting_agents("1")
    script = write_script(tmp_path, agents)
    run = run_script(script, tmp_path, "--agents", env.pop("AGENTS"), env=env)
    assert run.code == 0, run.stderr
    text = run.json()["result"]
    assert "depth" in text and "nested result:" in text
    requests = recorded(tmp_path)
    child = [r for r in requests if r["agent_type"] == "nester"][0]
    assert "Agent" in [t["name"] for t in child["tools"]], "listed explicitly, so granted"


def test_concurrency_limit_refuses_with_documented_text(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call(f"c{i}") for i in range(3)]},
                    {"text": "{{tool_results}}"},
                ],
            },
            {"agent_type": "Explore", "turns": [{"text": "child ok", "delay_ms": 200}]},
        ],
    )
    run = run_script(script, tmp_path, env={"SUBAGENTS_MAX_CONCURRENT_SUBAGENTS": "2"})
    assert run.code == 0, run.stderr
    text = run.json()["result"]
    assert text.count("child ok") == 2
    assert "limit reached" in text and "do not retry" in text.lower()


def test_interrupt_stops_sync_child_and_kills_its_shell(tmp_path: Path) -> None:
    pidfile = tmp_path / "shell.pid"
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("run a shell", subagent_type="general-purpose")]},
                    {"text": "never"},
                ],
            },
            {
                "agent_type": "general-purpose",
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "Bash",
                                "input": {"command": f"sleep 300 & echo $! > {pidfile}; wait"},
                            }
                        ]
                    },
                    {"text": "never"},
                ],
            },
        ],
    )
    proc = start_script(script, tmp_path, "--permission-mode", "bypassPermissions")
    deadline = time.monotonic() + 20
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline, "the child's shell never started"
        time.sleep(0.05)
    shell_pid = int(pidfile.read_text())
    assert pid_alive(shell_pid)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1, err
    result = json.loads(out)
    assert result["subtype"] == "error_during_execution"
    child = result["agents"][1]
    assert child["status"] == "killed"
    assert wait_until_dead(shell_pid), "the child's background shell process was orphaned"


def test_a_child_running_past_two_seconds_reports_progress(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("slow one")]},
                    {"text": "done"},
                ],
            },
            {
                "agent_type": "Explore",
                "turns": [
                    {"tool_calls": [{"name": "Glob", "input": {"pattern": "*"}}]},
                    {"text": "finished", "delay_ms": 2600},
                ],
            },
        ],
    )
    stream = run_script(script, tmp_path, output_format="stream-json")
    assert stream.code == 0, stream.stderr
    events = stream.events()
    progress = [e for e in events if e["type"] == "progress" and e["subtype"] == "agent_progress"]
    assert progress, "a progress event after 2 s"
    first = progress[0]
    child_id = next(e["agent_id"] for e in events if e.get("agent_type") == "Explore")
    assert first["agent_id"] == child_id and first["agent_type"] == "Explore"
    assert first["parent_agent_id"] == events[0]["session_id"]
    assert first["tool_use_count"] == 1
    assert first["recent_activities"] == ["Glob: *"]
    assert first["elapsed_ms"] >= 2000

    text = run_script(script.parent / "script.json", tmp_path, output_format="text")
    assert text.code == 0, text.stderr
    assert re.search(
        r"\[Explore a\w{8}\] 1 tool uses · \d+ tokens · [\d.]+ s · Glob: \*", text.stderr
    )


def test_read_only_children_get_the_slimmed_context(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "CLAUDE.md").write_text("PROJECT RULE: always say banana\n")
    (tmp_path / "AGENTS.md").write_text("AGENTS NOTE: kiwi\n")
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call("look", subagent_type="Explore"),
                            agent_call("plan", subagent_type="Plan"),
                            agent_call("work", subagent_type="general-purpose"),
                        ]
                    },
                    {"text": "ok"},
                ],
            },
            {"agent_type": "Explore", "turns": [{"text": "e"}]},
            {"agent_type": "Plan", "turns": [{"text": "p"}]},
            {"agent_type": "general-purpose", "turns": [{"text": "g"}]},
        ],
    )
    run = run_script(script, tmp_path, output_format="text")
    assert run.code == 0, run.stderr
    systems = {r["agent_type"]: r["system"] for r in recorded(tmp_path)}
    for full in ("main", "general-purpose"):
        assert "always say banana" in systems[full] and "kiwi" in systems[full]
        assert "<git_status>" in systems[full]
    for slim in ("Explore", "Plan"):
        assert "banana" not in systems[slim] and "kiwi" not in systems[slim]
        assert "<git_status>" not in systems[slim]
