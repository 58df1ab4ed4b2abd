"""Agent memory (``memory: user|project|local``) through the CLI on the scripted model."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cli_helpers import agent_call, recorded, run_script, tool_call, write_script
from subagents.agents.memory import INDEX_MAX_LINES, folder_name, read_index

DEFINITION = """---
name: noter
description: Keeps notes
tools: Read, Grep
memory: {scope}
---
You keep notes.
"""


def project(tmp_path: Path, scope: str = "project") -> Path:
    root = tmp_path / "proj"
    (root / ".claude" / "agents").mkdir(parents=True)
    (root / ".claude" / "agents" / "noter.md").write_text(DEFINITION.format(scope=scope))
    return root


def main_entry(prompt: str = "token N") -> dict[str, Any]:
    return {
        "agent_type": "main",
        "turns": [{"tool_calls": [agent_call(prompt, "noter")]}, {"text": "{{tool_results}}"}],
    }


def child_entry(*turns: dict[str, Any]) -> dict[str, Any]:
    return {"agent_type": "noter", "turns": list(turns)}


def child_requests(folder: Path) -> list[dict[str, Any]]:
    return [r for r in recorded(folder) if r["agent_type"] == "noter"]


def test_a_project_memory_is_loaded_updated_and_seen_by_the_next_run(tmp_path: Path) -> None:
    root = project(tmp_path)
    index = root / ".claude" / "agent-memory" / "noter" / "MEMORY.md"
    write = tool_call("Write", file_path=str(index), content="- the build runs with make\n")
    script = write_script(
        root, [main_entry(), child_entry({"tool_calls": [write]}, {"text": "saved"})]
    )
    first = run_script(script, root, output_format="stream-json")
    assert first.code == 0, first.stderr
    system = child_requests(root)[0]["system"]
    assert "# Persistent agent memory" in system and str(index.parent) in system
    assert "MEMORY.md does not exist yet" in system
    # default mode asks for a Write (denied headless): inside the memory folder it is allowed
    results = json.dumps(child_requests(root)[1]["messages"][-1])
    assert "is_error" not in results, results
    assert index.read_text() == "- the build runs with make\n"
    (loaded,) = [e for e in first.events() if e.get("subtype") == "memory_loaded"]
    assert loaded["scope"] == "project" and loaded["source"] == "project"
    assert loaded["path"] == str(index) and loaded["agent_type"] == "noter"
    (root / "requests.jsonl").unlink()
    second = run_script(
        write_script(root, [main_entry(), child_entry({"text": "remembered"})]), root
    )
    assert second.code == 0, second.stderr
    assert "- the build runs with make" in child_requests(root)[0]["system"]


def test_memory_tools_work_only_inside_the_folder(tmp_path: Path) -> None:
    root = project(tmp_path)
    outside = root / "src.txt"
    write = tool_call("Write", file_path=str(outside), content="x")
    script = write_script(
        root, [main_entry(), child_entry({"tool_calls": [write]}, {"text": "no"})]
    )
    run = run_script(script, root)
    assert run.code == 0, run.stderr
    result = child_requests(root)[1]["messages"][-1]["content"][0]
    assert result["is_error"] and "only for its memory folder" in result["content"]
    assert not outside.exists()
    assert "Write" in [t["name"] for t in child_requests(root)[0]["tools"]]


def test_user_and_local_scopes_follow_claude_codes_layout(tmp_path: Path) -> None:
    for scope, expected in (
        ("local", lambda root, home: root / ".claude" / "agent-memory-local" / "noter"),
        ("user", lambda root, home: home / ".claude" / "agent-memory" / "noter"),
    ):
        folder = tmp_path / scope
        folder.mkdir()
        root = project(folder, scope)
        home = folder / "userhome"
        home.mkdir()
        script = write_script(root, [main_entry(), child_entry({"text": "ok"})])
        run = run_script(script, root, env={"HOME": str(home)})
        assert run.code == 0, run.stderr
        where = expected(root, home)
        assert where.is_dir(), scope
        assert str(where) in child_requests(root)[0]["system"]


def test_a_memory_folder_that_leads_outside_is_refused(tmp_path: Path) -> None:
    root = project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / ".claude" / "agent-memory").mkdir()
    os.symlink(elsewhere, root / ".claude" / "agent-memory" / "noter")
    script = write_script(root, [main_entry(), child_entry({"text": "ok"})])
    run = run_script(script, root, output_format="stream-json")
    assert run.code == 0, run.stderr
    assert "Persistent agent memory" not in child_requests(root)[0]["system"]
    warnings = [e for e in run.events() if e.get("subtype") == "warning"]
    assert any("leads outside" in e["message"] for e in warnings), warnings


def test_the_index_is_bounded_and_names_are_safe_folders(tmp_path: Path) -> None:
    index = tmp_path / "MEMORY.md"
    index.write_text("".join(f"note {i}\n" for i in range(500)))
    text, truncated = read_index(index)
    assert truncated and len(text.splitlines()) == INDEX_MAX_LINES
    os.mkfifo(tmp_path / "fifo")
    assert read_index(tmp_path / "fifo") == ("", False)  # no blocking on a FIFO
    assert folder_name("noter") == "noter"
    assert "/" not in folder_name("../x") and folder_name("../x") != folder_name("..-x")
    assert folder_name("Python Testing Expert").startswith("Python-Testing-Expert-")


def _noter_from_cli(scope: str = "project") -> str:
    """The agent as ``--agents`` JSON: found without reading a (linked) ``.claude`` folder."""
    return json.dumps(
        {"noter": {"description": "Keeps notes", "prompt": "You keep notes.", "memory": scope}}
    )


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_linked_claude_folder_makes_nothing_outside_the_project(tmp_path: Path) -> None:
    """A repository whose ``.claude`` (or ``.claude/agent-memory``) is a symlink out of it: the
    memory is refused with a warning and nothing is created where the link leads. Before,
    ``mkdir`` ran first: ``.claude/agent-memory`` linked out got ``noter/`` made there before
    the check refused it; ``.claude`` linked out passed the check (it was measured against the
    link's own target) and the agent wrote its memory there."""
    for linked in (".claude", ".claude/agent-memory"):
        case = tmp_path / linked.replace("/", "_")
        root, elsewhere = case / "proj", case / "elsewhere"
        root.mkdir(parents=True)
        elsewhere.mkdir()
        (root / ".git").mkdir()
        (root / linked).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(elsewhere, root / linked)
        note = tool_call("Write", file_path="{{capture.folder}}/MEMORY.md", content="pwned")
        child = child_entry({"tool_calls": [note]}, {"text": "ok"})
        child["turns"][0]["capture"] = {"folder": r"memory folder, (\S+) \("}
        script = write_script(root, [main_entry(), child])
        run = run_script(script, root, "--agents", _noter_from_cli(), output_format="stream-json")
        assert run.code == 0, run.stderr
        warnings = [e["message"] for e in run.events() if e.get("subtype") == "warning"]
        assert any("leads outside" in w and "noter" in w for w in warnings), (linked, warnings)
        assert "Persistent agent memory" not in child_requests(root)[0]["system"]
        assert _tree(elsewhere) == [], linked


def test_links_that_stay_where_the_memory_belongs_are_followed(tmp_path: Path) -> None:
    """A link inside the base (``.claude/agent-memory`` to ``.claude/notes``) and a user's own
    linked ``~/.claude`` (dotfiles) are followed as before; a link below the base to the rest
    of the project (``noter`` to the project's root) is refused: the memory agent may write
    anywhere in its folder whatever its mode says."""
    root = tmp_path / "proj"
    (root / ".claude" / "notes").mkdir(parents=True)
    os.symlink("notes", root / ".claude" / "agent-memory")
    dotfiles, home = tmp_path / "dotfiles", tmp_path / "home"
    dotfiles.mkdir()
    home.mkdir()
    os.symlink(dotfiles, home / ".claude")
    script = write_script(root, [main_entry(), child_entry({"text": "ok"})])
    for scope, where in (
        ("project", root / ".claude" / "notes" / "noter"),
        ("user", dotfiles / "agent-memory" / "noter"),
    ):
        run = run_script(script, root, "--agents", _noter_from_cli(scope), env={"HOME": str(home)})
        assert run.code == 0, run.stderr
        assert where.is_dir(), scope
        assert str(where) in child_requests(root)[-1]["system"], scope
    (root / ".claude" / "notes" / "noter").rmdir()
    os.symlink(root, root / ".claude" / "notes" / "noter")
    run = run_script(script, root, "--agents", _noter_from_cli(), output_format="stream-json")
    warnings = [e["message"] for e in run.events() if e.get("subtype") == "warning"]
    assert any("leads outside" in w for w in warnings), warnings
    assert "Persistent agent memory" not in child_requests(root)[-1]["system"]
