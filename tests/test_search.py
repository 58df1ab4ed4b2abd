"""Grep and Glob search what a model means (issue 14 item 5) and never what the read rules deny
(issue 13 item 3), with ``rg`` and with the Python engine alike.

Every tool-level test runs twice: ``rg`` (the ``ripgrep`` wheel installed by ``scripts/setup``)
and the Python walk (``SUBAGENTS_RIPGREP=0``). End-to-end tests drive the real CLI.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import run_script, tool_call, write_script
from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.permissions import PermissionChecker, PermissionContext, parse_rule
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolError, ToolOutput
from subagents.tools.edit import EditTool
from subagents.tools.glob import GlobTool
from subagents.tools.grep import GrepTool
from subagents.tools.read import ReadTool
from subagents.tools.ripgrep import ripgrep_binary
from test_hooks_permissions_e2e import write_settings


@pytest.fixture(params=["rg", "python"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        monkeypatch.setenv("SUBAGENTS_RIPGREP", "0")
        assert ripgrep_binary() is None
    else:
        monkeypatch.delenv("SUBAGENTS_RIPGREP", raising=False)
        assert ripgrep_binary() is not None, "scripts/setup installs the ripgrep wheel"
    return str(request.param)


def make(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    make(
        root,
        {
            ".gitignore": "build/\nnode_modules\n*.log\n!keep.log\n",
            "src/agent_tool.py": "class AgentTool:\n    pass\n",
            "src/sub/.gitignore": "generated_*.py\n",
            "src/sub/generated_x.py": "class AgentTool: generated\n",
            "src/sub/real.py": "# class AgentTool is mentioned here\n",
            "build/lib/agent_tool.py": "class AgentTool: built copy\n",
            "node_modules/pkg/index.py": "class AgentTool: vendored\n",
            ".venv/lib/site.py": "class AgentTool: installed\n",
            "debug.log": "class AgentTool in a log\n",
            "keep.log": "class AgentTool kept\n",
            ".github/workflows/ci.yml": "run: class AgentTool\n",
            "excluded/x.py": "class AgentTool excluded by info/exclude\n",
        },
    )
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text("excluded/\n")
    return root


def context(root: Path, *deny: str, ask: tuple[str, ...] = ()) -> ToolContext:
    checker = PermissionChecker(
        context=PermissionContext(
            project_root=root,
            home=root.parent / "home",
            deny=tuple(parse_rule(text, "settings.json") for text in deny),
            ask=tuple(parse_rule(text, "settings.json") for text in ask),
        )
    )
    return ToolContext(
        cwd=root,
        roots=(root,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="a", agent_type="main"),
        can_use_tool=checker,
        read_guard=checker,
    )


async def run(tool: Tool[Any], ctx: ToolContext, **raw: Any) -> str:
    args = tool.input_model.model_validate(raw)
    try:
        out: ToolOutput = await tool.call(args, ctx, CallInfo(tool_use_id="t", progress=print))
    except ToolError as exc:
        return f"ERROR {exc}"
    return out.content


def listed(output: str) -> set[str]:
    if output in ("No files found", "No matches found"):
        return set()
    return {line for line in output.split("\n") if line and not line.startswith("Found ")}


# --- what is searched -------------------------------------------------------------------------


async def test_grep_with_no_path_skips_ignored_hidden_and_vcs(project: Path, engine: str) -> None:
    out = await run(GrepTool(), context(project), pattern="class AgentTool")
    assert listed(out) == {"src/agent_tool.py", "src/sub/real.py", "keep.log"}


async def test_glob_with_no_path_skips_the_same(project: Path, engine: str) -> None:
    out = await run(GlobTool(), context(project), pattern="**/*.py")
    assert listed(out) == {"src/agent_tool.py", "src/sub/real.py"}


async def test_a_hidden_component_in_the_request_searches_hidden_files(
    project: Path, engine: str
) -> None:
    ctx = context(project)
    assert listed(await run(GlobTool(), ctx, pattern=".github/**/*.yml")) == {
        ".github/workflows/ci.yml"
    }
    nested = await run(GrepTool(), ctx, pattern="AgentTool", glob="**/.github/**")
    assert listed(nested) == {".github/workflows/ci.yml"}
    assert listed(await run(GrepTool(), ctx, pattern="AgentTool", glob="*.yml")) == set()
    found = await run(GrepTool(), ctx, pattern="AgentTool", glob=".github/**/*.yml")
    assert listed(found) == {".github/workflows/ci.yml"}
    inside = await run(GrepTool(), ctx, pattern="AgentTool", path=".venv")
    assert listed(inside) == {".venv/lib/site.py"}


async def test_a_folder_named_as_path_is_searched_even_if_ignored(
    project: Path, engine: str
) -> None:
    out = await run(GrepTool(), context(project), pattern="AgentTool", path="build")
    assert listed(out) == {"build/lib/agent_tool.py"}
    globbed = await run(GlobTool(), context(project), pattern="build/**/*.py")
    assert listed(globbed) == {"build/lib/agent_tool.py"}


async def test_ignore_rules_hold_without_a_git_repository(tmp_path: Path, engine: str) -> None:
    make(tmp_path, {".gitignore": "out/\n", "out/a.txt": "needle\n", "b.txt": "needle\n"})
    out = await run(GrepTool(), context(tmp_path), pattern="needle")
    assert listed(out) == {"b.txt"}


async def test_content_and_count_modes_agree_across_engines(project: Path, engine: str) -> None:
    make(project, {"src/crlf.txt": "one\r\nclass AgentTool\r\nthree\r\n"})
    ctx = context(project)
    content = await run(GrepTool(), ctx, pattern="AgentTool$", output_mode="content")
    assert content == "src/crlf.txt:2:class AgentTool"  # `$` before a CRLF, no "\r" shown
    count = await run(GrepTool(), ctx, pattern="AgentTool", output_mode="count")
    assert count.split("\n")[:4] == [
        "keep.log:1",
        "src/agent_tool.py:1",
        "src/crlf.txt:1",
        "src/sub/real.py:1",
    ]


async def test_a_python_only_pattern_still_works_with_rg(project: Path, engine: str) -> None:
    # Look-ahead is Python regex syntax that rg (Rust regex) refuses: the Python engine answers.
    out = await run(GrepTool(), context(project), pattern=r"class (?=AgentTool:$)")
    assert listed(out) == {"src/agent_tool.py"}
    bad = await run(GrepTool(), context(project), pattern="(unclosed")
    assert bad.startswith("ERROR Invalid regular expression")


@pytest.mark.timeout(30)
async def test_special_files_in_the_tree_are_skipped(project: Path, engine: str) -> None:
    os.mkfifo(project / "src" / "pipe.py")
    (project / "src" / "link.py").symlink_to(project / "build" / "lib" / "agent_tool.py")
    ctx = context(project)
    grep = await asyncio.wait_for(run(GrepTool(), ctx, pattern="AgentTool"), 20)
    assert "pipe" not in grep and "link" not in grep
    glob = await asyncio.wait_for(run(GlobTool(), ctx, pattern="src/*.py"), 20)
    assert listed(glob) == {"src/agent_tool.py"}
    assert "pipe" in await run(GrepTool(), ctx, pattern="x", path="src/pipe.py")


# --- read rules on every file touched (issue 13 item 3) ----------------------------------------


@pytest.fixture
def secrets(project: Path) -> Path:
    make(project, {"secret/key.txt": "TOKEN=hunter2\n", "sub/readme.txt": "nothing\n"})
    (project / "alias.txt").symlink_to(project / "secret" / "key.txt")
    return project


@pytest.mark.parametrize(
    "raw",
    [
        {"pattern": "TOKEN"},
        {"pattern": "TOKEN", "glob": "secret/*"},
        {"pattern": "TOKEN", "path": "sub/.."},
        {"pattern": "TOKEN", "output_mode": "content"},
        {"pattern": "TOKEN", "output_mode": "count", "path": "."},
    ],
)
async def test_grep_never_shows_a_denied_file(
    secrets: Path, engine: str, raw: dict[str, Any]
) -> None:
    out = await run(GrepTool(), context(secrets, "Read(./secret/**)"), **raw)
    assert "hunter2" not in out and "key.txt" not in out and "secret" not in out, out
    allowed = await run(GrepTool(), context(secrets), **raw)
    assert "key.txt" in allowed  # the same call without the rule finds it


async def test_glob_does_not_list_denied_files(secrets: Path, engine: str) -> None:
    out = await run(GlobTool(), context(secrets, "Read(**/*.txt)"), pattern="**/*")
    assert ".txt" not in out
    out = await run(GlobTool(), context(secrets, "Read(./secret)"), pattern="**/*.txt")
    assert listed(out) == {"sub/readme.txt"}


async def test_an_ask_rule_keeps_a_file_out_of_searches(secrets: Path, engine: str) -> None:
    ctx = context(secrets, ask=("Read(./secret/**)",))
    assert "key.txt" not in await run(GrepTool(), ctx, pattern="TOKEN")


async def test_edit_and_read_through_a_symlink_show_nothing_denied(secrets: Path) -> None:
    ctx = context(secrets, "Read(./secret/**)")
    edit = await run(EditTool(), ctx, file_path="alias.txt", old_string="TOKEN", new_string="T")
    assert edit.startswith("ERROR Permission to read") and "hunter2" not in edit
    assert (secrets / "secret" / "key.txt").read_text() == "TOKEN=hunter2\n"
    read = await run(ReadTool(), ctx, file_path="sub/../alias.txt")
    assert read.startswith("ERROR Permission to read") and "hunter2" not in read


def test_deny_rules_apply_to_every_file_through_the_cli(secrets: Path) -> None:
    write_settings(secrets, {"permissions": {"deny": ["Read(./secret/**)"]}})
    calls = [
        tool_call("Grep", pattern="TOKEN", output_mode="content"),
        tool_call("Grep", pattern="TOKEN", glob="secret/*"),
        tool_call("Grep", pattern="TOKEN", path="sub/.."),
        tool_call("Glob", pattern="**/key.txt"),
        tool_call("Edit", file_path="alias.txt", old_string="TOKEN", new_string="X"),
        tool_call("Grep", pattern="class AgentTool"),
    ]
    script = write_script(
        secrets.parent,
        [{"agent_type": "main", "turns": [{"tool_calls": calls}, {"text": "{{tool_results}}"}]}],
    )
    run_ = run_script(script, secrets, "--permission-mode", "acceptEdits")
    assert run_.code == 0, run_.stderr
    result = run_.json()["result"]
    assert "hunter2" not in result
    # key.txt is named once: in the Edit refusal (the file the model named through a link).
    assert result.count("key.txt") == 1 and "Permission to read" in result
    # The last search: only the project's own file, not build/, node_modules/ or .venv/.
    assert "src/agent_tool.py" in result
    assert "build/" not in result and "node_modules" not in result and ".venv" not in result


@pytest.mark.parametrize("agent_type", ["Explore", "general-purpose"])
def test_a_childs_search_keeps_the_read_rules(secrets: Path, agent_type: str) -> None:
    from cli_helpers import agent_call

    write_settings(secrets, {"permissions": {"deny": ["Read(./secret/**)"]}})
    child_calls = [tool_call("Grep", pattern="TOKEN", output_mode="content")]
    script = write_script(
        secrets.parent,
        [
            {
                "agent_type": "main",
                "turns": [{"tool_calls": [agent_call("look", agent_type)]}, {"text": "ok"}],
            },
            {
                "agent_type": agent_type,
                "turns": [{"tool_calls": child_calls}, {"text": "child saw: {{tool_results}}"}],
            },
        ],
    )
    run_ = run_script(script, secrets, output_format="stream-json")
    assert run_.code == 0, run_.stderr
    assert "hunter2" not in run_.stdout
    assert "child saw: No matches found" in run_.stdout


@pytest.mark.parametrize("pattern", ["a\x00b", "x\ud800", "\udc80"])
async def test_patterns_no_argument_can_hold_are_searched_in_python(
    project: Path, engine: str, pattern: str
) -> None:
    out = await run(GrepTool(), context(project), pattern=pattern)
    assert out == "No files found"
