"""EnterWorktree / ExitWorktree on real git repositories, with the real Bash and Write tools."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.hooks.config import parse_hooks
from subagents.tools.base import CallInfo, ToolContext, ToolError
from subagents.tools.bash import BashTool
from subagents.tools.inputs.bash import BashInput
from subagents.tools.inputs.worktree import EnterWorktreeInput, ExitWorktreeInput
from subagents.tools.inputs.write import WriteInput
from subagents.tools.worktree_tools import EnterWorktreeTool, ExitWorktreeTool, WorktreeSession
from subagents.tools.write import WriteTool

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}
INFO = CallInfo(tool_use_id="toolu_1", progress=lambda _: None)


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "f.txt").write_text("original\n")
    (root / "src" / "m.py").write_text("x = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root.resolve()


def main_ctx(cwd: Path, *, parent: str | None = None) -> ToolContext:
    agent = AgentRef(agent_id="main", agent_type="main")
    if parent is not None:
        agent = AgentRef(agent_id="a1", agent_type="worker", parent_agent_id=parent)
    return ToolContext(cwd=cwd, roots=(cwd,), abort=AbortSignal(), agent=agent)


def tools(session: WorktreeSession | None = None) -> tuple[EnterWorktreeTool, ExitWorktreeTool]:
    state = session or WorktreeSession()
    return EnterWorktreeTool(state), ExitWorktreeTool(state)


def our_branches(root: Path) -> list[str]:
    return git(root, "branch", "--list", "subagents/*", "--format=%(refname:short)").split()


async def test_enter_moves_cwd_roots_and_bash_into_a_new_worktree(repo: Path) -> None:
    enter, _ = tools()
    ctx = main_ctx(repo)

    out = await enter.call(EnterWorktreeInput(name="feature-x"), ctx, INFO)

    path = repo / ".subagents" / "worktrees" / "feature-x"
    assert ctx.cwd == path
    assert ctx.roots == (path,)
    assert out.metadata == {"worktreePath": str(path), "worktreeBranch": "subagents/feature-x"}
    assert f"ExitWorktree returns to {repo}" in out.content
    bash = await BashTool().call(BashInput(command="pwd"), ctx, INFO)
    assert bash.content.strip() == str(path)
    with pytest.raises(ToolError, match="outside the working directory"):
        await WriteTool().call(WriteInput(file_path=str(repo / "f.txt"), content="no"), ctx, INFO)
    await WriteTool().call(WriteInput(file_path="f.txt", content="in worktree\n"), ctx, INFO)
    assert (repo / "f.txt").read_text() == "original\n"
    assert (path / "f.txt").read_text() == "in worktree\n"


async def test_enter_from_a_subfolder_lands_in_the_same_subfolder(repo: Path) -> None:
    enter, _ = tools()
    ctx = main_ctx(repo / "src")
    await enter.call(EnterWorktreeInput(), ctx, INFO)
    assert ctx.cwd.name == "src"
    assert ctx.cwd.parent.parent.name == "worktrees"
    assert ctx.cwd.parent.name.startswith("session-")


async def test_only_one_worktree_at_a_time(repo: Path) -> None:
    enter, _ = tools()
    ctx = main_ctx(repo)
    await enter.call(EnterWorktreeInput(name="one"), ctx, INFO)
    with pytest.raises(ToolError, match="call ExitWorktree before entering another"):
        await enter.call(EnterWorktreeInput(name="two"), ctx, INFO)
    assert our_branches(repo) == ["subagents/one"]


async def test_exit_keep_restores_cwd_and_leaves_the_worktree(repo: Path) -> None:
    enter, leave = tools()
    ctx = main_ctx(repo)
    await enter.call(EnterWorktreeInput(name="kept"), ctx, INFO)
    (ctx.cwd / "f.txt").write_text("work\n")

    out = await leave.call(ExitWorktreeInput(action="keep"), ctx, INFO)

    assert (ctx.cwd, ctx.roots) == (repo, (repo,))
    assert "kept worktree" in out.content
    assert (repo / ".subagents" / "worktrees" / "kept" / "f.txt").read_text() == "work\n"
    assert our_branches(repo) == ["subagents/kept"]
    await enter.call(EnterWorktreeInput(name="again"), ctx, INFO)  # a new one may be entered


async def test_exit_remove_refuses_uncommitted_work_without_the_flag(repo: Path) -> None:
    enter, leave = tools()
    ctx = main_ctx(repo)
    await enter.call(EnterWorktreeInput(name="dirty"), ctx, INFO)
    path = ctx.cwd
    (path / "f.txt").write_text("unsaved\n")

    with pytest.raises(ToolError, match=r"1 uncommitted change .*discard_changes: true"):
        await leave.call(ExitWorktreeInput(action="remove"), ctx, INFO)
    assert ctx.cwd == path  # a refused exit changes nothing
    assert (path / "f.txt").read_text() == "unsaved\n"

    out = await leave.call(ExitWorktreeInput(action="remove", discard_changes=True), ctx, INFO)

    assert "removed worktree" in out.content
    assert (ctx.cwd, ctx.roots) == (repo, (repo,))
    assert not path.exists()
    assert our_branches(repo) == []


async def test_exit_remove_refuses_new_commits_without_the_flag(repo: Path) -> None:
    enter, leave = tools()
    ctx = main_ctx(repo)
    await enter.call(EnterWorktreeInput(name="committed"), ctx, INFO)
    (ctx.cwd / "new.txt").write_text("x\n")
    git(ctx.cwd, "add", "new.txt")
    git(ctx.cwd, "commit", "-q", "-m", "work")
    with pytest.raises(ToolError, match="1 new commit"):
        await leave.call(ExitWorktreeInput(action="remove"), ctx, INFO)
    assert our_branches(repo) == ["subagents/committed"]


async def test_exit_remove_of_a_clean_worktree_removes_it(repo: Path) -> None:
    enter, leave = tools()
    ctx = main_ctx(repo)
    await enter.call(EnterWorktreeInput(name="clean"), ctx, INFO)
    await leave.call(ExitWorktreeInput(action="remove"), ctx, INFO)
    assert ctx.cwd == repo
    assert not (repo / ".subagents" / "worktrees" / "clean").exists()
    assert our_branches(repo) == []
    assert git(repo, "status", "--porcelain") == ""


async def test_exit_without_an_active_worktree_is_an_error(repo: Path) -> None:
    _, leave = tools()
    with pytest.raises(ToolError, match="No worktree is active"):
        await leave.call(ExitWorktreeInput(action="keep"), main_ctx(repo), INFO)


async def test_children_cannot_use_the_tools(repo: Path) -> None:
    enter, leave = tools()
    ctx = main_ctx(repo, parent="main")
    with pytest.raises(ToolError, match="only available to the main session"):
        await enter.call(EnterWorktreeInput(), ctx, INFO)
    with pytest.raises(ToolError, match="only available to the main session"):
        await leave.call(ExitWorktreeInput(action="keep"), ctx, INFO)
    assert ctx.cwd == repo
    assert our_branches(repo) == []


def test_names_are_validated() -> None:
    for bad in ("../escape", "-flag", "a b", ""):
        with pytest.raises(ValidationError):
            EnterWorktreeInput(name=bad)
    with pytest.raises(ValidationError):
        ExitWorktreeInput.model_validate({"action": "delete"})


async def test_name_clash_is_a_clear_tool_error(repo: Path) -> None:
    git(repo, "branch", "subagents/taken")
    enter, _ = tools()
    ctx = main_ctx(repo)
    with pytest.raises(ToolError, match=r"Cannot create a worktree: .*already exists"):
        await enter.call(EnterWorktreeInput(name="taken"), ctx, INFO)
    assert ctx.cwd == repo


async def test_outside_git_without_hooks_is_a_clear_tool_error(tmp_path: Path) -> None:
    enter, _ = tools()
    ctx = main_ctx(tmp_path)
    with pytest.raises(ToolError, match="no WorktreeCreate hook configured"):
        await enter.call(EnterWorktreeInput(), ctx, INFO)
    assert ctx.cwd == tmp_path


async def test_outside_git_the_hooks_create_and_remove(tmp_path: Path) -> None:
    plain, base = tmp_path / "plain", tmp_path / "made"
    plain.mkdir()
    base.mkdir()
    create = tmp_path / "create.py"
    create.write_text(
        "import json, os, sys\n"
        "p = os.path.join(sys.argv[1], json.load(sys.stdin)['name'])\n"
        "os.makedirs(p)\nprint(p)\n"
    )
    remove = tmp_path / "remove.py"
    remove.write_text(
        "import json, shutil, sys\nshutil.rmtree(json.load(sys.stdin)['worktree_path'])\n"
    )
    py = shlex.quote(sys.executable)
    hooks = parse_hooks(
        {
            "WorktreeCreate": [
                {"hooks": [{"type": "command", "command": f"{py} {create} {base}"}]}
            ],
            "WorktreeRemove": [{"hooks": [{"type": "command", "command": f"{py} {remove}"}]}],
        },
        "test settings",
    )
    enter, leave = tools(WorktreeSession(hooks=hooks))
    ctx = main_ctx(plain)

    await enter.call(EnterWorktreeInput(name="hooked"), ctx, INFO)
    assert ctx.cwd == base / "hooked"
    with pytest.raises(ToolError, match="Cannot check the hook-created worktree"):
        await leave.call(ExitWorktreeInput(action="remove"), ctx, INFO)
    assert ctx.cwd == base / "hooked"

    await leave.call(ExitWorktreeInput(action="remove", discard_changes=True), ctx, INFO)
    assert ctx.cwd == plain
    assert not (base / "hooked").exists()
