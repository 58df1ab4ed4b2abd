"""What the main agent and its children receive as system prompt: guidance, environment,
project instructions (Claude Code's files and imports), and the SessionOptions that change it."""

from __future__ import annotations

import datetime
import json
import platform
import subprocess
from pathlib import Path

import pytest

from cli_helpers import agent_call, recorded, run_script, write_script
from subagents.agents.project_context import MAX_IMPORT_DEPTH, load_instructions
from subagents.agents.prompts import MAIN_PROMPT
from subagents.session import Session, SessionOptions
from subagents.testing import ScriptedModel


def git_repo(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder


def project(tmp_path: Path) -> tuple[Path, Path]:
    """A git repo inside a parent folder, a home folder, and an instruction file at every level."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "CLAUDE.md").write_text("USER-LEVEL rule\n")
    (tmp_path / "CLAUDE.md").write_text("PARENT-FOLDER rule\n")
    repo = git_repo(tmp_path / "repo")
    (repo / "CLAUDE.md").write_text("PROJECT rule; see @docs/style.md\n")
    (repo / "docs").mkdir()
    (repo / "docs" / "style.md").write_text("IMPORTED style rule, back to @../CLAUDE.md\n")
    (repo / "CLAUDE.local.md").write_text("LOCAL private rule\n")
    (repo / "AGENTS.md").write_text("AGENTS-MD rule\n")
    (repo / "tracked.txt").write_text("x\n")
    return repo, home


def test_main_request_carries_environment_and_instructions(tmp_path: Path) -> None:
    repo, home = project(tmp_path)
    script = write_script(
        repo,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call("look", "Explore"),
                            agent_call("work", "general-purpose"),
                        ]
                    },
                    {"text": "ok"},
                ],
            },
            {"agent_type": "Explore", "turns": [{"text": "explored"}]},
            {"agent_type": "general-purpose", "turns": [{"text": "worked"}]},
        ],
    )
    run = run_script(script, repo, env={"HOME": str(home)})
    assert run.code == 0, run.stderr
    requests = recorded(repo)
    system = requests[0]["system"]
    assert system.startswith(MAIN_PROMPT)
    assert f"Working directory: {repo.resolve()}" in system
    assert "Is a git repository: yes" in system
    assert f"Platform: {platform.system().lower()}" in system
    assert f"OS version: {platform.system()} {platform.release()}" in system
    assert f"Today's date: {datetime.date.today().isoformat()}" in system
    assert "(model id: scripted:" in system
    assert "<git_status>" in system and "?? tracked.txt" in system
    order = [
        "USER-LEVEL",
        "PARENT-FOLDER",
        "PROJECT rule",
        "IMPORTED style",
        "AGENTS-MD",
        "LOCAL private",
    ]
    positions = [system.index(marker) for marker in order]
    assert positions == sorted(positions), positions
    assert system.count("PROJECT rule") == 1  # the import cycle back to CLAUDE.md stops
    by_type = {r["agent_type"]: r for r in requests}
    explore, worker = by_type["Explore"]["system"], by_type["general-purpose"]["system"]
    # Read-only agents keep their slimmed context; others get the instructions and the snapshot.
    assert "PROJECT rule" not in explore and "<git_status>" not in explore
    assert "PROJECT rule" in worker and "<git_status>" in worker
    for child in (explore, worker):
        assert "Use absolute file paths" in child
        assert f"your working directory is {repo.resolve()}" in child
        assert f"Today's date: {datetime.date.today().isoformat()}" in child


def test_imports_are_bounded_and_skip_code_and_special_files(tmp_path: Path) -> None:
    chain = [tmp_path / f"f{i}.md" for i in range(MAX_IMPORT_DEPTH + 3)]
    for index, path in enumerate(chain[:-1]):
        path.write_text(f"level {index} @{chain[index + 1].name}\n")
    chain[-1].write_text("the bottom\n")
    (tmp_path / "CLAUDE.md").write_text(
        "root @f0.md and `@f5.md` in code\n```\n@nothere.md\n```\nmail a@b.md @/dev/zero\n"
    )
    (tmp_path / "nothere.md").write_text("FENCED IMPORT")
    text = load_instructions(tmp_path, tmp_path / "nohome")
    assert f"level {MAX_IMPORT_DEPTH - 1}" in text
    assert f"level {MAX_IMPORT_DEPTH + 1}" not in text  # depth limit
    assert "FENCED IMPORT" not in text and "the bottom" not in text


def test_a_fifo_instruction_file_is_skipped(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "CLAUDE.md")
    (tmp_path / "AGENTS.md").write_text("still read")
    assert "still read" in load_instructions(tmp_path, tmp_path / "nohome")


async def test_session_options_replace_append_and_file(tmp_path: Path) -> None:
    def model() -> ScriptedModel:
        return ScriptedModel.from_dict(
            {"agents": [{"agent_type": "main", "turns": [{"text": "ok"}]}]}
        )

    (tmp_path / "CLAUDE.md").write_text("PROJECT rule")
    replaced = model()
    await Session(
        SessionOptions(
            model=replaced,
            cwd=tmp_path,
            system_prompt="CUSTOM ROLE",
            append_system_prompt="LAST WORD",
        )
    ).run("go")
    system = replaced.requests[0]["system"]
    assert system.startswith("CUSTOM ROLE") and system.endswith("LAST WORD")
    assert "PROJECT rule" in system and "<env>" not in system and MAIN_PROMPT not in system
    prompt_file = tmp_path / "prompt.txt"
    prompt_file.write_text("FROM FILE")
    from_file = model()
    await Session(
        SessionOptions(model=from_file, cwd=tmp_path, system_prompt_file=prompt_file)
    ).run("go")
    assert from_file.requests[0]["system"].startswith("FROM FILE")
    appended = model()
    await Session(SessionOptions(model=appended, cwd=tmp_path, append_system_prompt="EXTRA")).run(
        "go"
    )
    assert appended.requests[0]["system"].startswith(MAIN_PROMPT)
    assert appended.requests[0]["system"].endswith("EXTRA")
    with pytest.raises(ValueError, match="exclude each other"):
        Session(
            SessionOptions(
                model=model(), cwd=tmp_path, system_prompt="a", system_prompt_file=prompt_file
            )
        )
    with pytest.raises(ValueError, match=r"missing\.txt"):
        Session(
            SessionOptions(model=model(), cwd=tmp_path, system_prompt_file=tmp_path / "missing.txt")
        )


def test_definition_critical_reminder_is_sent_every_turn(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("check the work", "verification")]},
                    {"text": "ok"},
                ],
            },
            {
                "agent_type": "verification",
                "turns": [
                    {"tool_calls": [{"name": "Glob", "input": {"pattern": "*"}}]},
                    {"text": "VERDICT: PASS"},
                ],
            },
        ],
    )
    run = run_script(script, tmp_path)
    assert run.code == 0, run.stderr
    checks = [r for r in recorded(tmp_path) if r["agent_type"] == "verification"]
    assert len(checks) == 2
    for request in checks:
        last = json.dumps(request["messages"][-1])
        assert "This is a verification-only task" in last
    assert checks[0]["system"] == checks[1]["system"]


def test_cli_system_prompt_flags(tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"agent_type": "main", "turns": [{"text": "ok"}]}])
    (tmp_path / "CLAUDE.md").write_text("PROJECT rule")
    run = run_script(
        script, tmp_path, "--system-prompt", "CLI ROLE", "--append-system-prompt", "CLI LAST"
    )
    assert run.code == 0, run.stderr
    system = recorded(tmp_path)[-1]["system"]
    assert system.startswith("CLI ROLE") and system.endswith("CLI LAST")
    assert "PROJECT rule" in system
    prompt_file = tmp_path / "p.md"
    prompt_file.write_text("FILE ROLE")
    assert run_script(script, tmp_path, "--system-prompt-file", str(prompt_file)).code == 0
    assert recorded(tmp_path)[-1]["system"].startswith("FILE ROLE")
    missing = run_script(script, tmp_path, "--system-prompt-file", str(tmp_path / "nope.md"))
    assert missing.code == 2 and "nope.md" in missing.stderr
    both = run_script(script, tmp_path, "--system-prompt", "a", "--system-prompt-file", "b")
    assert both.code == 2 and "not allowed with" in both.stderr
