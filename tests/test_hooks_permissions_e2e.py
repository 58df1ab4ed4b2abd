"""Settings hooks and permission rules through the real CLI, for the main agent and children."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_helpers import agent_call, run_script, tool_call, write_script


def write_settings(project: Path, settings: dict[str, Any]) -> None:
    folder = project / ".claude"
    folder.mkdir(exist_ok=True)
    (folder / "settings.json").write_text(json.dumps(settings))


def logging_hook(tmp_path: Path, name: str, *, exit_code: int = 0, stderr: str = "") -> str:
    """A hook script that saves its stdin as one file in ``<name>.d/`` (hooks run concurrently)."""
    script = tmp_path / f"{name}.sh"
    folder = tmp_path / f"{name}.d"
    folder.mkdir()
    lines = ["#!/bin/sh", f'cat > "$(mktemp -p {folder} input.XXXXXX)"']
    if stderr:
        lines.append(f"echo '{stderr}' >&2")
    lines.append(f"exit {exit_code}")
    script.write_text("\n".join(lines) + "\n")
    script.chmod(0o755)
    return str(script)


def read_log(tmp_path: Path, name: str) -> list[dict[str, Any]]:
    folder = tmp_path / f"{name}.d"
    return [json.loads(path.read_text()) for path in sorted(folder.iterdir())]


def hook(command: str, matcher: str | None = None) -> dict[str, Any]:
    group: dict[str, Any] = {"hooks": [{"type": "command", "command": command}]}
    if matcher is not None:
        group["matcher"] = matcher
    return group


def test_subagent_start_stop_pairs_and_tool_hooks_know_the_child(tmp_path: Path) -> None:
    write_settings(
        tmp_path,
        {
            "hooks": {
                "SubagentStart": [hook(logging_hook(tmp_path, "start"))],
                "SubagentStop": [hook(logging_hook(tmp_path, "stop"))],
                "PreToolUse": [hook(logging_hook(tmp_path, "pre"), matcher="Glob|Grep")],
            }
        },
    )
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call("fine", "Explore", description="ok child"),
                            agent_call("breaks", "Plan", description="bad child"),
                        ]
                    },
                    {"text": "{{tool_results}}"},
                ],
            },
            {
                "agent_type": "Explore",
                "turns": [
                    {"tool_calls": [tool_call("Glob", pattern="*")]},
                    {"text": "explored"},
                ],
            },
            # Plan has one turn only: its second request fails, so the child fails.
            {
                "agent_type": "Plan",
                "turns": [{"tool_calls": [tool_call("Glob", pattern="*")]}],
            },
        ],
    )
    run = run_script(script, tmp_path)
    assert run.code == 0, run.stderr
    children = {a["agentId"]: a for a in run.json()["agents"][1:]}
    assert {a["status"] for a in children.values()} == {"completed", "failed"}
    starts, stops = read_log(tmp_path, "start"), read_log(tmp_path, "stop")
    assert sorted(s["agent_id"] for s in starts) == sorted(children)
    assert sorted(s["agent_id"] for s in stops) == sorted(children), "each child stopped once"
    for stop in stops:
        assert stop["hook_event_name"] == "SubagentStop"
        assert stop["agent_type"] == children[stop["agent_id"]]["agentType"]
        assert Path(stop["agent_transcript_path"]).exists()
        assert stop["session_id"] == run.json()["session_id"]
    pre = read_log(tmp_path, "pre")
    assert {p["agent_id"] for p in pre} == set(children)
    assert all(p["tool_name"] == "Glob" and p["hook_event_name"] == "PreToolUse" for p in pre)


def test_pre_tool_use_exit_2_blocks_with_stderr_fed_back(tmp_path: Path) -> None:
    write_settings(
        tmp_path,
        {
            "hooks": {
                "PreToolUse": [
                    hook(
                        logging_hook(
                            tmp_path, "guard", exit_code=2, stderr="writes are frozen today"
                        ),
                        matcher="Write",
                    )
                ]
            }
        },
    )
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [tool_call("Write", file_path="a.txt", content="x")]},
                    {"text": "said: {{tool_results}}"},
                ],
            }
        ],
    )
    run = run_script(script, tmp_path, "--permission-mode", "acceptEdits", output_format="text")
    assert run.code == 0, run.stderr
    assert "writes are frozen today" in run.stdout
    assert not (tmp_path / "a.txt").exists()


def test_deny_rules_hold_inside_children_including_compound_commands(tmp_path: Path) -> None:
    write_settings(
        tmp_path,
        {
            "permissions": {
                "allow": ["Bash(git status:*)", "Bash(echo:*)"],
                "deny": ["Bash(rm:*)", "Agent(Plan)"],
            }
        },
    )
    (tmp_path / "keep.txt").write_text("precious\n")
    attempts = [
        "rm keep.txt",
        "git status && rm keep.txt",
        "echo hi; rm keep.txt",
        "echo $(rm keep.txt)",
        "ls | xargs rm",
    ]
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call(
                                "try",
                                "general-purpose",
                                description="try rm",
                                mode="bypassPermissions",
                            ),
                            agent_call("plan", "Plan", description="plan"),
                        ]
                    },
                    {"text": "{{tool_results}}"},
                ],
            },
            {
                "agent_type": "general-purpose",
                "turns": [
                    {"tool_calls": [tool_call("Bash", command=c) for c in attempts]},
                    {"text": "child saw: {{tool_results}}"},
                ],
            },
        ],
    )
    run = run_script(script, tmp_path)
    assert run.code == 0, run.stderr
    assert (tmp_path / "keep.txt").read_text() == "precious\n"
    report = run.json()["result"]
    assert report.count("denied") >= len(attempts)
    assert "Agent type 'Plan' has been denied by permission rule 'Agent(Plan)' from" in report
    assert "settings.json" in report


def test_broken_settings_file_refuses_to_start(tmp_path: Path) -> None:
    folder = tmp_path / ".claude"
    folder.mkdir()
    (folder / "settings.json").write_text('{"permissions": {"deny": ["Bash(rm:*)"],}}')
    script = write_script(tmp_path, [{"agent_type": "main", "turns": [{"text": "hi"}]}])
    run = run_script(script, tmp_path, output_format="text")
    assert run.code == 2
    assert "settings.json:1:" in run.stderr and "invalid JSON" in run.stderr


def test_hook_allow_answers_asks_but_never_overrules_a_deny_rule(tmp_path: Path) -> None:
    allow = tmp_path / "allow.sh"
    allow.write_text(
        "#!/bin/sh\ncat > /dev/null\n"
        'echo \'{"hookSpecificOutput": {"hookEventName": "PreToolUse", '
        '"permissionDecision": "allow"}}\'\n'
    )
    allow.chmod(0o755)
    write_settings(
        tmp_path,
        {
            "permissions": {"deny": ["Bash(rm:*)"]},
            "hooks": {"PreToolUse": [hook(str(allow), matcher="Bash")]},
        },
    )
    (tmp_path / "keep.txt").write_text("precious\n")
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            tool_call("Bash", command="touch made.txt"),
                            tool_call("Bash", command="rm keep.txt"),
                        ]
                    },
                    {"text": "{{tool_results}}"},
                ],
            }
        ],
    )
    run = run_script(script, tmp_path)
    assert run.code == 0, run.stderr
    assert (tmp_path / "made.txt").exists(), "the hook's allow answered the ask"
    assert (tmp_path / "keep.txt").exists(), "the deny rule still held"
    assert "denied by rule 'Bash(rm:*)'" in run.json()["result"]


def test_background_and_stopped_children_get_their_subagent_stop_once(tmp_path: Path) -> None:
    write_settings(
        tmp_path,
        {
            "hooks": {
                "SubagentStart": [hook(logging_hook(tmp_path, "start"))],
                "SubagentStop": [hook(logging_hook(tmp_path, "stop"))],
            }
        },
    )
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call(
                                "quick", "Explore", description="quick bg", run_in_background=True
                            ),
                            agent_call(
                                "slow", "Plan", description="slow bg", run_in_background=True
                            ),
                        ]
                    },
                    {
                        "capture": {"slow": r"agentId: \w+[\s\S]*?agentId: (\w+)"},
                        "tool_calls": [tool_call("TaskStop", task_id="{{capture.slow}}")],
                    },
                    {"text": "stopped one"},
                    {"text": "ack {{last_user}}"},
                    {"text": "ack again"},
                ],
            },
            {"agent_type": "Explore", "turns": [{"text": "quick done"}]},
            {"agent_type": "Plan", "turns": [{"text": "never", "delay_ms": 30000}]},
        ],
    )
    run = run_script(script, tmp_path)
    assert run.code == 0, run.stderr
    statuses = {a["agentType"]: a["status"] for a in run.json()["agents"][1:]}
    assert statuses == {"Explore": "completed", "Plan": "killed"}
    starts, stops = read_log(tmp_path, "start"), read_log(tmp_path, "stop")
    children = {a["agentId"] for a in run.json()["agents"][1:]}
    assert sorted(s["agent_id"] for s in starts) == sorted(children)
    assert sorted(s["agent_id"] for s in stops) == sorted(children)
