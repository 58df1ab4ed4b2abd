"""`isolation: "worktree"` through the real CLI on real git repositories (issue 9)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from cli_helpers import run_cli, run_script, write_script

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(repo: Path, *args: str) -> str:
    import os

    out = subprocess.run(
        ["git", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **GIT_ENV},
    )
    return out.stdout


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "shared.txt").write_text("original\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    return repo


def isolated_call(prompt: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "Agent",
        "input": {
            "description": "isolated",
            "prompt": prompt,
            "subagent_type": "general-purpose",
            "isolation": "worktree",
            **extra,
        },
    }


def test_parallel_isolated_children_keep_their_own_branches(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            isolated_call(f"edit as {name}") for name in ("red", "green", "blue")
                        ]
                        + [isolated_call("look only")]
                    },
                    {"text": "{{tool_results}}"},
                ],
            },
            {
                "agent_type": "general-purpose",
                "match": r"edit as (\w+)",
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "Write",
                                "input": {"file_path": "shared.txt", "content": "{{match.1}}\n"},
                            }
                        ]
                    },
                    {"text": "wrote {{match.1}}"},
                ],
            },
            {
                "agent_type": "general-purpose",
                "match": "look only",
                "turns": [
                    {"tool_calls": [{"name": "Read", "input": {"file_path": "shared.txt"}}]},
                    {"text": "looked"},
                ],
            },
        ],
    )
    run = run_script(script, repo, "--permission-mode", "acceptEdits")
    assert run.code == 0, run.stderr
    assert (repo / "shared.txt").read_text() == "original\n", "main tree untouched"
    assert git(repo, "status", "--porcelain") == ""
    text = run.json()["result"]
    kept = re.findall(r"\[worktree kept: (\S+) \(branch (\S+)\)\]", text)
    assert len(kept) == 3, text
    contents = sorted(Path(path, "shared.txt").read_text().strip() for path, _ in kept)
    assert contents == ["blue", "green", "red"]
    branches = git(repo, "branch", "--list").split()
    for _, branch in kept:
        assert branch in branches
    # The child that changed nothing left nothing behind.
    worktrees = git(repo, "worktree", "list", "--porcelain").count("worktree ")
    assert worktrees == 1 + 3
    assert len([b for b in branches if b.startswith("subagents/")]) == 3


def test_failed_child_keeps_its_worktree_and_tasks_show_names_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [isolated_call("fail please")]},
                    {"text": "{{tool_results}}"},
                ],
            },
            # One turn only: the child's second request fails, so the child fails.
            {
                "agent_type": "general-purpose",
                "turns": [
                    {"tool_calls": [{"name": "Read", "input": {"file_path": "shared.txt"}}]},
                ],
            },
        ],
    )
    run = run_script(script, repo)
    assert run.code == 0, run.stderr
    child = run.json()["agents"][1]
    assert child["status"] == "failed"
    shown = json.loads(run_cli("tasks", "show", child["agentId"], "--json", cwd=repo).stdout)
    assert Path(shown["worktreePath"]).is_dir()
    assert shown["worktreeBranch"].startswith("subagents/")


def test_isolation_outside_git_without_hooks_is_a_clear_error(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [isolated_call("x")]},
                    {"text": "{{tool_results}}"},
                ],
            }
        ],
    )
    run = run_script(script, plain)
    assert run.code == 0, run.stderr
    assert "not a git repository and no WorktreeCreate hook configured" in run.json()["result"]


def test_cwd_and_isolation_are_exclusive_and_cwd_is_confined(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo / "sub").mkdir()
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            isolated_call("both", cwd=str(repo)),
                            {
                                "name": "Agent",
                                "input": {
                                    "description": "outside",
                                    "prompt": "o",
                                    "subagent_type": "Explore",
                                    "cwd": "/",
                                },
                            },
                            {
                                "name": "Agent",
                                "input": {
                                    "description": "inside",
                                    "prompt": "in sub",
                                    "subagent_type": "Explore",
                                    "cwd": str(repo / "sub"),
                                },
                            },
                        ]
                    },
                    {"text": "{{tool_results}}"},
                ],
            },
            {
                "agent_type": "Explore",
                "turns": [
                    {"tool_calls": [{"name": "Bash", "input": {"command": "pwd"}}]},
                    {"text": "pwd was {{tool_results}}"},
                ],
            },
        ],
    )
    run = run_script(script, repo)
    assert run.code == 0, run.stderr
    text = run.json()["result"]
    assert "mutually exclusive" in text
    assert "outside the allowed directories" in text
    assert f"pwd was {(repo / 'sub').resolve()}" in text
