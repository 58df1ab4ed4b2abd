"""``subagents agents list|show|validate`` through a real argparse parser."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from subagents.cli.agents_cmd import register

GOOD = (
    "---\nname: reviewer\ndescription: Reviews code\ntools: Read, Grep\nmodel: opus\n---\nReview.\n"
)
BROKEN = "---\nname: broken\n---\nx\n"  # no description: Claude Code refuses it too
UNKNOWN_FIELD = "---\nname: odd\ndescription: d\nflavour: mint\n---\nx\n"


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="subagents")
    root.add_argument("--cwd")  # as the real main parser has: the subcommand must not clobber it
    register(root.add_subparsers(dest="command"))
    return root


def run(*argv: str) -> int:
    args = parser().parse_args(list(argv))
    code: int = args.handler(args)
    return code


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SUBAGENTS_HOME", str(home / ".subagents"))
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    monkeypatch.chdir(root)
    return root


def add(folder: Path, filename: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / filename).write_text(text, encoding="utf-8")
    return folder / filename


def test_list_json_has_source_path_tools_model(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = add(project / ".claude" / "agents", "reviewer.md", GOOD)
    assert run("agents", "list", "--json") == 0
    entries = json.loads(capsys.readouterr().out)
    by_name = {entry["name"]: entry for entry in entries}
    assert list(by_name)[:4] == ["general-purpose", "Explore", "Plan", "verification"]
    assert by_name["reviewer"] == {
        "name": "reviewer",
        "description": "Reviews code",
        "source": "project",
        "path": str(path),
        "tools": ["Read", "Grep"],
        "model": "opus",
    }
    general = by_name["general-purpose"]
    assert (general["source"], general["path"], general["tools"]) == ("built-in", None, None)
    assert all(
        set(entry) == {"name", "description", "source", "path", "tools", "model"}
        for entry in entries
    )


def test_list_errors_go_to_stderr_and_list_still_prints(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    add(project / ".claude" / "agents", "a.md", GOOD)
    broken = add(project / ".claude" / "agents", "b.md", BROKEN)
    assert run("agents", "list", "--json") == 0
    captured = capsys.readouterr()
    names = [entry["name"] for entry in json.loads(captured.out)]
    assert "reviewer" in names and "broken" not in names
    assert f"{broken}: description:" in captured.err


def test_list_text_is_an_aligned_table(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    add(project / ".subagents" / "agents", "a.md", GOOD)
    assert run("agents", "list") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["NAME", "SOURCE", "MODEL", "TOOLS"]
    source_column = lines[0].index("SOURCE")
    reviewer = next(line for line in lines if line.startswith("reviewer"))
    assert reviewer[source_column:].startswith("project")
    assert all(line[source_column - 2 : source_column] == "  " for line in lines)


def test_cwd_option_before_and_after_subcommand(
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    add(project / ".claude" / "agents", "a.md", GOOD)
    monkeypatch.chdir(tmp_path)
    assert run("agents", "list", "--json", "--cwd", str(project)) == 0
    assert "reviewer" in {e["name"] for e in json.loads(capsys.readouterr().out)}
    args = parser().parse_args(["--cwd", str(project), "agents", "list", "--json"])
    assert args.handler(args) == 0
    assert "reviewer" in {e["name"] for e in json.loads(capsys.readouterr().out)}


def test_list_with_agents_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = json.dumps({"quick": {"description": "fast one", "prompt": "go", "model": "haiku"}})
    assert run("agents", "list", "--json", "--agents", spec) == 0
    entries = {e["name"]: e for e in json.loads(capsys.readouterr().out)}
    assert (entries["quick"]["source"], entries["quick"]["model"]) == ("cli", "haiku")


def test_show_finds_by_loose_name(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("agents", "show", "general_purpose", "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["name"] == "general-purpose"
    assert shown["systemPrompt"]
    assert run("agents", "show", "explore") == 0
    out = capsys.readouterr().out
    assert "name: Explore" in out and "read-only" in out


def test_show_unknown_exits_1(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("agents", "show", "nobody") == 1
    assert "unknown agent type 'nobody'" in capsys.readouterr().err


def test_validate_default_sources(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("agents", "validate") == 0
    add(project / ".claude" / "agents", "good.md", GOOD)
    assert run("agents", "validate") == 0
    broken = add(project / ".claude" / "agents", "b.md", BROKEN)
    capsys.readouterr()
    assert run("agents", "validate") == 1
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"{broken}: description: required field is missing",
    ]


def test_validate_one_file(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = add(project / "defs", "good.md", GOOD)
    bad = add(project / "defs", "bad.md", BROKEN)
    assert run("agents", "validate", str(good)) == 0
    assert run("agents", "validate", str(bad)) == 1
    assert capsys.readouterr().out.startswith(f"{bad}: description: ")


def test_validate_folder_reports_warnings_and_errors(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = project / "defs"
    add(folder, "good.md", GOOD)
    odd = add(folder, "odd.md", UNKNOWN_FIELD)
    assert run("agents", "validate", str(folder)) == 0
    err = capsys.readouterr().err
    assert f"warning: {odd}: flavour: unknown field" in err
    reserved = add(folder, "v.md", "---\nname: verification\ndescription: d\n---\nx\n")
    bad = add(folder, "z.md", "---\nname: z\ndescription: never closed\n")
    notes = add(folder, "notes.md", "# Reference notes, not an agent\n")
    assert run("agents", "validate", str(folder)) == 1
    captured = capsys.readouterr()
    assert f"warning: {notes}: skipped, not an agent definition" in captured.err
    lines = captured.out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{reserved}: name: 'verification' is reserved")
    assert lines[1].startswith(f"{bad}: frontmatter: ")


def test_validate_missing_path(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("agents", "validate", str(project / "nope.md")) == 1
    assert capsys.readouterr().out.startswith(f"{project / 'nope.md'}: path: ")


def test_validate_bad_agents_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("agents", "validate", "--agents", '{"x": {"description": "d"}}') == 1
    assert capsys.readouterr().out.startswith("--agents: x.prompt: ")


def test_no_subcommand_is_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("agents") == 2
    assert "usage" in capsys.readouterr().err
