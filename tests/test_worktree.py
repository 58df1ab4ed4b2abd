"""Worktree isolation on real temporary git repositories (SPEC §10)."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from subagents.cli.main import main
from subagents.hooks.config import HookConfig, parse_hooks
from subagents.worktrees.admin import (
    list_worktrees,
)
from subagents.worktrees.commands import (
    create_isolated,
    create_with_hooks,
    remove_with_hooks,
)
from subagents.worktrees.git import (
    EXCLUDE_LINE,
    NotAGitRepository,
    WorktreeError,
    create_worktree,
    finish_worktree,
    isolated_roots,
    settle_orphan,
    working_dir_in,
)
from subagents.worktrees.git import (
    Worktree as WorktreeInfo,
)

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def commit_all(cwd: Path, message: str) -> str:
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "-m", message)
    return git(cwd, "rev-parse", "HEAD").strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "f.txt").write_text("original\n")
    (root / "src").mkdir()
    (root / "src" / "m.py").write_text("x = 1\n")
    commit_all(root, "init")
    return root.resolve()


def worktree_paths(root: Path) -> list[str]:
    out = git(root, "worktree", "list", "--porcelain")
    return [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("worktree ")]


def our_branches(root: Path) -> list[str]:
    return git(root, "branch", "--list", "subagents/*", "--format=%(refname:short)").split()


def assert_nothing_left(root: Path, name: str) -> None:
    assert not (root / ".subagents" / "worktrees" / name).exists()
    assert worktree_paths(root) == [str(root)]
    assert our_branches(root) == []
    assert not (root / ".git" / "worktrees" / name).exists()


# -- creation ----------------------------------------------------------------------------------


async def test_create_makes_a_real_worktree_on_a_new_branch(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    info = await create_worktree(repo, "a1b2c3d4e5")

    assert info.name == "agent-a1b2c3d4"
    assert info.path == repo / ".subagents" / "worktrees" / "agent-a1b2c3d4"
    assert info.branch == "subagents/agent-a1b2c3d4"
    assert (info.repo_root, info.head_commit, info.base_ref) == (repo, head, "refs/heads/main")
    assert str(info.path) in worktree_paths(repo)
    assert git(info.path, "rev-parse", "--abbrev-ref", "HEAD").strip() == info.branch
    assert (info.path / "f.txt").read_text() == "original\n"
    # The user's status stays clean: the worktree folder is excluded.
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""


async def test_exclude_line_is_added_once(repo: Path) -> None:
    await create_worktree(repo, "a1111111x")
    await create_worktree(repo, "a2222222x")
    lines = (repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert lines.count(EXCLUDE_LINE) == 1


async def test_three_children_edit_the_same_file_each_on_its_own_branch(repo: Path) -> None:
    infos = await asyncio.gather(
        *(create_worktree(repo, agent_id) for agent_id in ("a0000001x", "a0000002x", "a0000003x"))
    )
    assert len({i.path for i in infos}) == 3
    for index, info in enumerate(infos):
        (info.path / "f.txt").write_text(f"child {index}\n")
        commit_all(info.path, f"child {index}")

    outcomes = [await finish_worktree(info, success=True) for info in infos]

    for index, (info, outcome) in enumerate(zip(infos, outcomes, strict=True)):
        assert outcome.kept
        assert "1 new commit" in outcome.reason
        assert outcome.result_fields() == {
            "worktreePath": str(info.path),
            "worktreeBranch": info.branch,
        }
        assert git(repo, "show", f"{info.branch}:f.txt") == f"child {index}\n"
        assert (info.path / "f.txt").read_text() == f"child {index}\n"
    assert (repo / "f.txt").read_text() == "original\n"
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "log", "--format=%s", "main") == "init\n"


async def test_detached_head_branches_from_the_commit(repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "f.txt").write_text("second\n")
    commit_all(repo, "second")
    git(repo, "checkout", "-q", "--detach", first)

    info = await create_worktree(repo, "a3333333x")

    assert info.head_commit == first
    assert info.base_ref is None
    assert (info.path / "f.txt").read_text() == "original\n"


async def test_created_from_a_subfolder_uses_the_repository_root(repo: Path) -> None:
    info = await create_worktree(repo / "src", "a4444444x")
    assert info.repo_root == repo
    assert working_dir_in(info, repo / "src") == info.path / "src"
    assert working_dir_in(info, Path("/elsewhere")) == info.path


# -- creation failures: clear errors, nothing half-created --------------------------------------


async def test_outside_git_without_hooks_is_a_clear_error(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(NotAGitRepository, match="not a git repository"):
        await create_worktree(plain, "a5555555x")
    with pytest.raises(WorktreeError, match="no WorktreeCreate hook configured"):
        await create_isolated(plain, "a5555555x", hooks=HookConfig())
    assert list(plain.iterdir()) == []


async def test_existing_branch_is_a_name_clash_and_is_left_alone(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "branch", "subagents/agent-a6666666")

    with pytest.raises(WorktreeError, match="branch 'subagents/agent-a6666666' already exists"):
        await create_worktree(repo, "a6666666x")

    assert our_branches(repo) == ["subagents/agent-a6666666"]
    assert git(repo, "rev-parse", "subagents/agent-a6666666").strip() == head
    assert not (repo / ".subagents" / "worktrees" / "agent-a6666666").exists()
    assert worktree_paths(repo) == [str(repo)]


async def test_existing_folder_is_a_name_clash_and_is_left_alone(repo: Path) -> None:
    folder = repo / ".subagents" / "worktrees" / "agent-a7777777"
    folder.mkdir(parents=True)
    (folder / "precious.txt").write_text("mine")

    with pytest.raises(WorktreeError, match="already exists"):
        await create_worktree(repo, "a7777777x")

    assert (folder / "precious.txt").read_text() == "mine"
    assert our_branches(repo) == []


async def test_held_ref_lock_fails_with_gits_message_and_leaves_nothing(repo: Path) -> None:
    lock = repo / ".git" / "refs" / "heads" / "subagents" / "agent-a8888888.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")

    with pytest.raises(WorktreeError, match=r"agent-a8888888\.lock"):
        await create_worktree(repo, "a8888888x")

    lock.unlink()
    assert_nothing_left(repo, "agent-a8888888")


async def test_failing_post_checkout_hook_rolls_back_worktree_and_branch(repo: Path) -> None:
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\necho checkout hook says no >&2\nexit 1\n")
    hook.chmod(0o755)

    with pytest.raises(WorktreeError, match="checkout hook says no"):
        await create_worktree(repo, "a9999999x")

    assert_nothing_left(repo, "agent-a9999999")


async def test_cancelled_creation_kills_git_and_rolls_back(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "hook.pid"
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\necho $$ > {shlex.quote(str(marker))}\nexec sleep 60\n")
    hook.chmod(0o755)

    task = asyncio.create_task(create_worktree(repo, "abababab1"))
    async with asyncio.timeout(20):
        while not marker.exists() or not marker.read_text().strip():
            await asyncio.sleep(0.02)
    task.cancel()
    async with asyncio.timeout(20):
        with pytest.raises(asyncio.CancelledError):
            await task

    assert_nothing_left(repo, "agent-abababab")
    pid = int(marker.read_text())
    assert not _alive(pid), "the git hook's process outlived the cancelled creation"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # ESRCH: it exited mid-read
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def test_repository_without_a_commit_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    with pytest.raises(WorktreeError, match="no commit yet"):
        await create_worktree(empty, "acacacac1")
    assert not (empty / ".subagents").exists()


# -- end of a run ------------------------------------------------------------------------------


async def test_success_without_changes_removes_worktree_branch_and_metadata(repo: Path) -> None:
    info = await create_worktree(repo, "b1111111x")
    assert (repo / ".git" / "worktrees" / info.name / "subagents.json").exists()

    outcome = await finish_worktree(info, success=True)

    assert not outcome.kept
    assert outcome.result_fields() == {}
    assert_nothing_left(repo, info.name)


async def test_failure_keeps_an_unchanged_worktree(repo: Path) -> None:
    info = await create_worktree(repo, "b2222222x")
    outcome = await finish_worktree(info, success=False)
    assert outcome.kept
    assert "did not succeed" in outcome.reason
    assert info.path.is_dir()
    assert our_branches(repo) == [info.branch]


async def test_a_commit_keeps_the_worktree_even_with_a_clean_status(repo: Path) -> None:
    info = await create_worktree(repo, "b3333333x")
    (info.path / "new.txt").write_text("work\n")
    commit_all(info.path, "work")
    assert git(info.path, "status", "--porcelain") == ""

    outcome = await finish_worktree(info, success=True)

    assert outcome.kept
    assert "0 uncommitted changes and 1 new commit" in outcome.reason


async def test_an_untracked_file_keeps_the_worktree(repo: Path) -> None:
    info = await create_worktree(repo, "b4444444x")
    (info.path / "scratch.txt").write_text("notes\n")
    outcome = await finish_worktree(info, success=True)
    assert outcome.kept
    assert "1 uncommitted change " in outcome.reason


# -- crash recovery ----------------------------------------------------------------------------


async def test_settle_orphan_keeps_a_dead_childs_worktree(repo: Path) -> None:
    info = await create_worktree(repo, "c1111111x")
    record = json.loads(json.dumps(info.to_dict()))
    assert WorktreeInfo.from_dict(record) == info

    outcome = await settle_orphan(record)

    assert outcome.kept
    assert info.path.is_dir()


async def test_settle_orphan_removes_a_completed_unchanged_worktree(repo: Path) -> None:
    info = await create_worktree(repo, "c2222222x")
    outcome = await settle_orphan(info.to_dict(), completed=True)
    assert not outcome.kept
    assert_nothing_left(repo, info.name)


async def test_settle_orphan_keeps_a_completed_worktree_with_changes(repo: Path) -> None:
    info = await create_worktree(repo, "c3333333x")
    (info.path / "f.txt").write_text("edited\n")
    outcome = await settle_orphan(info.to_dict(), completed=True)
    assert outcome.kept
    assert (info.path / "f.txt").read_text() == "edited\n"


async def test_settle_orphan_after_the_folder_was_already_removed(repo: Path) -> None:
    info = await create_worktree(repo, "c4444444x")
    git(repo, "worktree", "remove", "--force", str(info.path))
    git(repo, "branch", "-D", str(info.branch))

    outcome = await settle_orphan(info.to_dict(), completed=False)

    assert not outcome.kept
    assert outcome.reason == "already removed"


async def test_settle_orphan_keeps_the_branch_of_a_deleted_folder_with_commits(
    repo: Path,
) -> None:
    info = await create_worktree(repo, "c5555555x")
    (info.path / "f.txt").write_text("committed\n")
    commit_all(info.path, "work")
    git(repo, "worktree", "remove", "--force", str(info.path))

    outcome = await settle_orphan(info.to_dict(), completed=True)

    assert outcome.kept
    assert outcome.branch == info.branch
    assert our_branches(repo) == [info.branch]


def test_a_record_without_a_path_names_the_field() -> None:
    with pytest.raises(WorktreeError, match="'path'"):
        WorktreeInfo.from_dict({"name": "agent-x"})


# -- outside git: WorktreeCreate / WorktreeRemove hooks ----------------------------------------

CREATE_HOOK = """
import json, os, sys
data = json.load(sys.stdin)
open(os.environ["LOG"], "a").write(json.dumps(data) + "\\n")
path = os.path.join(os.environ["BASE"], data["name"])
os.makedirs(path)
print("creating...")
print(path)
"""

REMOVE_HOOK = """
import json, os, shutil, sys
data = json.load(sys.stdin)
open(os.environ["LOG"], "a").write(json.dumps(data) + "\\n")
shutil.rmtree(data["worktree_path"])
"""


def hook_config(tmp_path: Path, **events: str) -> HookConfig:
    """Hooks running the given Python sources; BASE and LOG are passed on the command line."""
    base, log = tmp_path / "hook-worktrees", tmp_path / "hooks.log"
    base.mkdir(exist_ok=True)
    raw: dict[str, object] = {}
    for event, source in events.items():
        script = tmp_path / f"{event}.py"
        script.write_text(source)
        command = (
            f"BASE={shlex.quote(str(base))} LOG={shlex.quote(str(log))} "
            f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
        )
        raw[event] = [{"hooks": [{"type": "command", "command": command}]}]
    return parse_hooks(raw, "test settings")


def hook_log(tmp_path: Path) -> list[dict[str, object]]:
    text = (tmp_path / "hooks.log").read_text()
    return [json.loads(line) for line in text.splitlines()]


async def test_outside_git_the_create_hook_makes_the_worktree(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    hooks = hook_config(tmp_path, WorktreeCreate=CREATE_HOOK, WorktreeRemove=REMOVE_HOOK)

    info = await create_isolated(plain, "d1111111x", hooks=hooks, session_id="s1")

    assert info.hook_based
    assert info.path == tmp_path / "hook-worktrees" / "agent-d1111111"
    assert info.path.is_dir()
    [payload] = hook_log(tmp_path)
    assert payload["hook_event_name"] == "WorktreeCreate"
    assert payload["name"] == "agent-d1111111"
    assert payload["session_id"] == "s1"
    assert payload["cwd"] == str(plain)

    outcome = await finish_worktree(info, success=True)
    assert outcome.kept
    assert outcome.result_fields() == {"worktreePath": str(info.path)}
    assert info.path.is_dir()

    await remove_with_hooks(info, hooks=hooks)
    assert not info.path.exists()
    assert hook_log(tmp_path)[-1]["worktree_path"] == str(info.path)


async def test_a_failing_create_hook_reports_its_stderr(tmp_path: Path) -> None:
    source = "import sys\nsys.stderr.write('no space for worktrees')\nsys.exit(1)\n"
    hooks = hook_config(tmp_path, WorktreeCreate=source)
    with pytest.raises(WorktreeError, match="no space for worktrees"):
        await create_with_hooks(tmp_path, "d2222222x", hooks=hooks)


async def test_a_create_hook_printing_no_folder_is_an_error(tmp_path: Path) -> None:
    hooks = hook_config(tmp_path, WorktreeCreate="print('/definitely/not/a/folder')\n")
    with pytest.raises(WorktreeError, match="not an existing absolute folder"):
        await create_with_hooks(tmp_path, "d3333333x", hooks=hooks)


async def test_removal_without_a_remove_hook_is_an_error(tmp_path: Path) -> None:
    hooks = hook_config(tmp_path, WorktreeCreate=CREATE_HOOK)
    info = await create_with_hooks(tmp_path, "d4444444x", hooks=hooks)
    with pytest.raises(WorktreeError, match="no WorktreeRemove hook configured"):
        await remove_with_hooks(info, hooks=hooks)
    assert info.path.is_dir()


async def test_inside_a_repository_git_is_used_even_with_hooks(repo: Path, tmp_path: Path) -> None:
    hooks = hook_config(tmp_path, WorktreeCreate=CREATE_HOOK)
    info = await create_isolated(repo, "d5555555x", hooks=hooks)
    assert not info.hook_based
    assert info.branch == "subagents/agent-d5555555"
    assert not (tmp_path / "hooks.log").exists()


# -- roots -------------------------------------------------------------------------------------


def test_isolated_roots_replace_the_checkout_and_keep_other_directories(tmp_path: Path) -> None:
    project, extra = tmp_path / "project", tmp_path / "extra"
    project.mkdir()
    extra.mkdir()
    worktree = project / ".subagents" / "worktrees" / "agent-x"
    roots = isolated_roots((project, extra), project / "src", worktree)
    assert roots == (worktree, extra)


# -- CLI ---------------------------------------------------------------------------------------


async def test_cli_lists_kept_worktrees_and_removes_them(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirty = await create_worktree(repo, "e1111111x")
    (dirty.path / "f.txt").write_text("dirty\n")
    clean = await create_worktree(repo, "e2222222x")
    git(repo, "worktree", "add", "-q", "-b", "users-own", str(repo.parent / "users-own"))
    capsys.readouterr()

    assert await asyncio.to_thread(main, ["worktrees", "list", "--json", "--cwd", str(repo)]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"agent-e1111111", "agent-e2222222"}
    assert rows["agent-e1111111"]["uncommitted"] == 1
    assert rows["agent-e1111111"]["agentId"] == "e1111111x"
    assert rows["agent-e2222222"]["uncommitted"] == 0
    assert rows["agent-e2222222"]["branch"] == "subagents/agent-e2222222"

    code = await asyncio.to_thread(
        main, ["worktrees", "remove", "agent-e1111111", "--cwd", str(repo)]
    )
    assert code == 1
    assert "1 uncommitted change" in capsys.readouterr().err
    assert dirty.path.is_dir()

    code = await asyncio.to_thread(
        main, ["worktrees", "remove", str(clean.path), "--cwd", str(repo)]
    )
    assert code == 0
    assert not clean.path.exists()
    code = await asyncio.to_thread(
        main, ["worktrees", "remove", "agent-e1111111", "--force", "--cwd", str(repo)]
    )
    assert code == 0
    assert our_branches(repo) == []
    assert worktree_paths(repo) == [str(repo), str(repo.parent / "users-own")]
    assert [e.name for e in await list_worktrees(repo)] == []


async def test_cli_outside_a_repository_and_for_an_unknown_name(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert await asyncio.to_thread(main, ["worktrees", "list", "--cwd", str(plain)]) == 1
    assert "not a git repository" in capsys.readouterr().err
    code = await asyncio.to_thread(main, ["worktrees", "remove", "agent-nope", "--cwd", str(repo)])
    assert code == 1
    assert "no subagents worktree 'agent-nope'" in capsys.readouterr().err
