"""Forks: byte-identical request prefix, the directive, fork-in-fork refusal, fork mode switch."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import recorded, run_script, write_script


def fork_call(prompt: str, **extra: object) -> dict[str, object]:
    return {"name": "Agent", "input": {"description": "forked job", "prompt": prompt, **extra}}


def test_fork_request_repeats_parent_request_up_to_the_directive(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [{"name": "Read", "input": {"file_path": "notes.txt"}}]},
                    {"tool_calls": [fork_call("scope: part one"), fork_call("scope: part two")]},
                    {"text": "merged {{tool_results}}"},
                ],
            },
            {
                "agent_type": "fork",
                "match": r"part (\w+)",
                "turns": [
                    {"text": "Scope: part {{match.1}}\nResult: ok"},
                ],
            },
        ],
    )
    run = run_script(script, tmp_path)
    assert run.code == 0, run.stderr
    assert "Scope: part one" in run.json()["result"]
    assert "Scope: part two" in run.json()["result"]
    requests = recorded(tmp_path)
    parent = [r for r in requests if r["agent_type"] == "main"][1]
    forks = [r for r in requests if r["agent_type"] == "fork"]
    assert len(forks) == 2
    for fork in forks:
        assert fork["system"] == parent["system"]
        assert json.dumps(fork["tools"]) == json.dumps(parent["tools"])
        assert fork["thinking"] == parent["thinking"]
        n = len(parent["messages"])
        assert json.dumps(fork["messages"][:n]) == json.dumps(parent["messages"])
        # Then the parent's own Agent turn, then placeholders + the directive.
        assert fork["messages"][n]["role"] == "assistant"
        last = fork["messages"][n + 1]
        kinds = [b["type"] for b in last["content"]]
        assert kinds == ["tool_result", "tool_result", "text"]
        assert last["content"][0]["content"] == last["content"][1]["content"]
        assert last["content"][2]["text"].startswith("<fork_directive>")
    # Sibling forks are identical up to their own task text.
    a, b = (json.dumps(f["messages"][-1]["content"][2]["text"]) for f in forks)
    assert a.split("Your task:")[0] == b.split("Your task:")[0]
    agents = run.json()["agents"]
    assert [a["agentType"] for a in agents].count("fork") == 2


def test_fork_inside_fork_is_refused(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [fork_call("outer job")]},
                    {"text": "{{tool_results}}"},
                ],
            },
            {
                "agent_type": "fork",
                "turns": [
                    {"tool_calls": [fork_call("inner job", subagent_type="fork")]},
                    {"text": "inner said: {{tool_results}}"},
                ],
            },
        ],
    )
    run = run_script(script, tmp_path)
    assert run.code == 0, run.stderr
    assert "Fork is not available inside a forked worker" in run.json()["result"]


def test_fork_mode_off_means_general_purpose(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [fork_call("no type given")]},
                    {"text": "{{tool_results}}"},
                ],
            },
            {"agent_type": "general-purpose", "turns": [{"text": "gp did it"}]},
        ],
    )
    run = run_script(script, tmp_path, env={"SUBAGENTS_FORK_SUBAGENT": "0"})
    assert run.code == 0, run.stderr
    assert "gp did it" in run.json()["result"]
    assert "fork" not in [r["agent_type"] for r in recorded(tmp_path)]
