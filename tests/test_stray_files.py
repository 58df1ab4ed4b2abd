"""Stray files never stop the CLI (issue 13 item 7): deep YAML, symlink loops, alias bombs,
FIFOs and devices where definitions or settings are expected, oversized files."""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

from cli_helpers import (
    CliRun,
    recorded,
    run_cli,
    run_script,
    script_args,
    tool_call,
    write_script,
)
from subagents.config_files import MAX_CONFIG_BYTES

GOOD = "---\nname: good\ndescription: a fine agent\n---\nbody\n"
DEEP = "---\nname: deep\ndescription: d\nx: " + "[" * 500 + "]" * 500 + "\n---\nbody\n"
BOMB = (
    "---\nname: bomb\ndescription: d\na: &a ["
    + ",".join(["lol"] * 9)
    + "]\n"
    + "".join(
        f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "---\nbody\n"
)


def _limited() -> None:
    # 1 GiB of address space: the alias bomb used to take `agents show` to ~4 GB.
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def cli(*args: str, cwd: Path) -> CliRun:
    return run_cli(*args, cwd=cwd, env={"HOME": str(cwd / "home")}, timeout=30, preexec_fn=_limited)


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    folder = tmp_path / ".claude" / "agents"
    folder.mkdir(parents=True)
    (folder / "good.md").write_text(GOOD)
    return folder


def _names(run: CliRun) -> list[str]:
    assert run.code == 0, run.stderr
    return [entry["name"] for entry in json.loads(run.stdout)]


def test_deep_yaml_and_an_alias_bomb_cost_only_their_own_file(agents: Path) -> None:
    (agents / "deep.md").write_text(DEEP)
    (agents / "bomb.md").write_text(BOMB)
    run = cli("agents", "list", "--json", cwd=agents.parent.parent)
    assert "good" in _names(run) and "deep" not in _names(run) and "bomb" not in _names(run)
    assert f"error: {agents / 'deep.md'}: frontmatter: invalid YAML: nested deeper" in run.stderr
    assert f"error: {agents / 'bomb.md'}: frontmatter: invalid YAML: aliases expand" in run.stderr
    show = cli("agents", "show", "bomb", "--json", cwd=agents.parent.parent)
    assert show.code == 1 and "unknown agent type 'bomb'" in show.stderr, show.stderr
    project = agents.parent.parent
    script = write_script(project, [{"agent_type": "main", "turns": [{"text": "done"}]}])
    run = cli(*script_args(script, output_format="json", prompt="go"), cwd=project)
    assert run.code == 0, run.stderr
    assert run.json()["result"] == "done"
    assert sum("nested deeper" in w or "aliases expand" in w for w in run.json()["warnings"]) == 2


def test_symlink_loops_dangling_links_and_special_files_are_skipped(agents: Path) -> None:
    (agents / "loop.md").symlink_to(agents / "loop.md")
    (agents / "dangling.md").symlink_to(agents / "missing.md")
    (agents / "sub").mkdir()
    (agents / "sub" / "again").symlink_to(agents)  # a folder loop
    os.mkfifo(agents / "fifo.md")
    (agents / "zero.md").symlink_to("/dev/zero")
    started = time.monotonic()
    run = cli("agents", "list", "--json", cwd=agents.parent.parent)
    assert time.monotonic() - started < 25, "no hang on the FIFO"
    assert _names(run).count("good") == 1
    for name in ("loop.md", "dangling.md", "fifo.md"):
        assert f"warning: {agents / name}: skipped" in run.stderr, name
    assert "zero.md: skipped: a symlink that leads outside" in run.stderr
    validate = cli("agents", "validate", str(agents / "fifo.md"), cwd=agents.parent.parent)
    assert validate.code == 1
    assert (
        f"{agents / 'fifo.md'}: file: is a FIFO (named pipe), not a regular file" in validate.stdout
    )


def test_an_oversized_definition_is_refused_without_reading_it_all(agents: Path) -> None:
    big = agents / "big.md"
    big.write_text(GOOD + "x" * MAX_CONFIG_BYTES)
    run = cli("agents", "validate", cwd=agents.parent.parent)
    assert run.code == 1
    assert run.stdout.startswith(f"{big}: file: file is ") and "limit" in run.stdout


def _settings_run(project: Path, *extra: str) -> CliRun:
    script = write_script(project, [{"agent_type": "main", "turns": [{"text": "done"}]}])
    return run_script(script, project, *extra, env={"HOME": str(project / "home")}, timeout=30)


def test_a_settings_fifo_or_device_does_not_hang_start_up(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    os.mkfifo(tmp_path / ".claude" / "settings.json")
    (tmp_path / ".claude" / "settings.local.json").symlink_to("/dev/zero")
    run = _settings_run(tmp_path)
    assert run.code == 0, run.stderr
    warnings = run.json()["warnings"]
    assert any("settings.json: is a FIFO (named pipe)" in w for w in warnings), warnings
    assert any("settings.local.json: is a character device" in w for w in warnings), warnings


def test_settings_named_on_the_command_line_must_be_a_regular_file(tmp_path: Path) -> None:
    run = _settings_run(tmp_path, "--settings", "/dev/zero")
    assert run.code == 2
    assert run.stderr.startswith("subagents: error: /dev/zero: is a character device")


def test_oversized_or_deep_settings_refuse_to_start(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text('{"env": {"X": "' + "x" * MAX_CONFIG_BYTES + '"}}')
    run = _settings_run(tmp_path, "--settings", str(big))
    assert run.code == 2 and f"{big}: file is " in run.stderr
    deep = tmp_path / "deep.json"
    deep.write_text('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    run = _settings_run(tmp_path, "--settings", str(deep))
    assert run.code == 2 and "nested deeper than 64 levels" in run.stderr


def test_a_fifo_in_the_project_never_hangs_a_file_tool(tmp_path: Path) -> None:
    """Read, Write, Edit and Grep on a FIFO (nobody writes to it) each answer with an error
    and the run ends; Grep walking the tree skips it."""
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    (tmp_path / "note.txt").write_text("needle here\n")
    calls = [
        tool_call("Read", file_path=str(fifo)),
        tool_call("Write", file_path=str(fifo), content="x"),
        tool_call("Edit", file_path=str(fifo), old_string="a", new_string="b"),
        tool_call("Grep", pattern="needle", path=str(fifo)),
        tool_call("Grep", pattern="needle", output_mode="files_with_matches"),
    ]
    turns = [{"tool_calls": [call]} for call in calls]
    script = write_script(
        tmp_path, [{"agent_type": "main", "turns": [*turns, {"text": "finished"}]}]
    )
    run = run_script(
        script, tmp_path, "--permission-mode", "bypassPermissions", env={"HOME": str(tmp_path)}
    )
    assert run.code == 0, run.stderr
    assert run.json()["result"] == "finished"
    results = [
        block
        for request in recorded(tmp_path)[1:]
        for message in request["messages"][-1:]
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert len(results) == len(calls)
    *on_fifo, walk = results
    for call, result in zip(calls, on_fifo, strict=False):
        assert result.get("is_error"), (call["name"], result)
    assert "note.txt" in json.dumps(walk["content"]) and "pipe.txt" not in json.dumps(
        walk["content"]
    )
