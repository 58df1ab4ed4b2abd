"""Path confinement: ``..`` and symlinks cannot take a file tool outside its roots."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.tools.base import ToolContext, ToolError
from subagents.tools.paths import display_path, resolve_path


def make_ctx(root: Path, *extra: Path) -> ToolContext:
    return ToolContext(
        cwd=root,
        roots=(root, *extra),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="a", agent_type="main"),
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("a\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret\n")
    return root


def test_relative_path_resolves_against_cwd(repo: Path) -> None:
    assert resolve_path("src/a.py", make_ctx(repo)) == (repo / "src" / "a.py").resolve()


def test_absolute_path_inside_root_is_allowed(repo: Path) -> None:
    target = repo / "src" / "a.py"
    assert resolve_path(str(target), make_ctx(repo)) == target.resolve()


def test_dotdot_inside_root_collapses(repo: Path) -> None:
    assert resolve_path("src/../src/a.py", make_ctx(repo)) == (repo / "src" / "a.py").resolve()


def test_dotdot_escape_is_refused_with_clear_message(repo: Path) -> None:
    with pytest.raises(ToolError) as info:
        resolve_path("../outside/secret.txt", make_ctx(repo))
    message = str(info.value)
    outside = (repo.parent / "outside" / "secret.txt").resolve()
    assert "'../outside/secret.txt'" in message
    assert f"resolves to '{outside}'" in message
    assert f"allowed: {repo.resolve()}" in message
    assert "confined to the working directory" in message


def test_absolute_path_outside_is_refused(repo: Path) -> None:
    with pytest.raises(ToolError, match="outside the working directory"):
        resolve_path(str(repo.parent / "outside" / "secret.txt"), make_ctx(repo))


def test_sibling_with_common_prefix_is_refused(repo: Path) -> None:
    # "/x/repo2" starts with the string "/x/repo" but is not inside it.
    sibling = repo.parent / "repo2"
    sibling.mkdir()
    with pytest.raises(ToolError):
        resolve_path(str(sibling / "f.txt"), make_ctx(repo))


def test_symlink_inside_pointing_outside_is_refused(repo: Path) -> None:
    (repo / "link.txt").symlink_to(repo.parent / "outside" / "secret.txt")
    with pytest.raises(ToolError, match="outside the working directory"):
        resolve_path("link.txt", make_ctx(repo))


def test_new_file_under_symlinked_dir_pointing_outside_is_refused(repo: Path) -> None:
    (repo / "escape").symlink_to(repo.parent / "outside", target_is_directory=True)
    with pytest.raises(ToolError, match="outside"):
        resolve_path("escape/new/deeper.txt", make_ctx(repo))


def test_dangling_symlink_pointing_outside_is_refused(repo: Path) -> None:
    (repo / "dangling").symlink_to(repo.parent / "outside" / "not-yet.txt")
    with pytest.raises(ToolError):
        resolve_path("dangling", make_ctx(repo))


def test_symlink_inside_pointing_inside_is_fine(repo: Path) -> None:
    (repo / "alias.py").symlink_to(repo / "src" / "a.py")
    assert resolve_path("alias.py", make_ctx(repo)) == (repo / "src" / "a.py").resolve()


def test_symlinked_cwd_root_still_matches(tmp_path: Path, repo: Path) -> None:
    # The root itself given through a symlink: both sides are resolved before comparing.
    via_link = tmp_path / "repo-link"
    via_link.symlink_to(repo, target_is_directory=True)
    assert resolve_path("src/a.py", make_ctx(via_link)) == (repo / "src" / "a.py").resolve()


def test_nonexistent_file_inside_root_is_allowed(repo: Path) -> None:
    assert resolve_path("new/dir/file.txt", make_ctx(repo)) == (
        repo.resolve() / "new" / "dir" / "file.txt"
    )


def test_added_directory_is_allowed(repo: Path) -> None:
    extra = repo.parent / "outside"
    ctx = make_ctx(repo, extra)
    assert resolve_path(str(extra / "secret.txt"), ctx) == (extra / "secret.txt").resolve()
    assert display_path(resolve_path(str(extra / "secret.txt"), ctx), ctx) == str(
        (extra / "secret.txt").resolve()
    )


def test_symlink_loop_is_a_tool_error(repo: Path) -> None:
    (repo / "loop1").symlink_to(repo / "loop2")
    (repo / "loop2").symlink_to(repo / "loop1")
    with pytest.raises(ToolError):
        resolve_path("loop1/x", make_ctx(repo))


def test_empty_path_is_refused(repo: Path) -> None:
    with pytest.raises(ToolError, match="empty"):
        resolve_path("  ", make_ctx(repo))


def test_display_path_is_relative_inside_cwd(repo: Path) -> None:
    ctx = make_ctx(repo)
    assert display_path(resolve_path("src/a.py", ctx), ctx) == "src/a.py"
