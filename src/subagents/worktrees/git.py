"""Git worktree isolation for sub-agents (SPEC §10).

A child started with ``isolation: "worktree"`` gets its own checkout: a real ``git worktree`` at
``<repo root>/.subagents/worktrees/<name>`` on a new branch ``subagents/<name>`` made from the
current HEAD commit, where ``<name>`` is ``agent-<first 8 of the agent id>``. The folder is listed
in the repository's ``info/exclude`` (once), so the user's ``git status`` stays clean.

Decisions, and why:

* The branch is namespaced (``subagents/agent-…``) so ``git branch`` shows at a glance what this
  runtime made, and nothing we create can shadow a user's ``agent-…`` branch.
* A *detached* HEAD is accepted: the worktree branches from the commit HEAD points at, as Claude
  Code does. Nothing is lost, since the child's work lands on its own named branch, and refusing
  would make isolation unusable during a bisect or a rebase. The base is recorded
  (``base_ref`` is None when detached). An *unborn* HEAD (no commit yet) is refused clearly.
* Name clashes (the folder or the branch already exists) are refused before anything is made.
  Any later failure — git refusing (a held ref lock), a failing ``post-checkout`` hook, a
  cancellation — removes exactly what this call created (folder, branch, git's admin entry) and
  never anything that existed before, then raises ``WorktreeError`` carrying git's stderr.
* Metadata (agent id, base commit) is written inside the worktree's own git admin folder
  (``.git/worktrees/<name>/subagents.json``), so ``git worktree remove`` or ``prune`` removes it
  with the worktree and it can never outlive what it describes.

End of a run (``finish_worktree``): success with no uncommitted change and no commit beyond the
base → worktree, branch and metadata removed; failure, abort, or any change → kept, and the
outcome names the path and branch (``worktreePath`` / ``worktreeBranch`` in the result).
Crash recovery (``settle_orphan``) applies the same rule to a worktree whose child died.

Outside a git repository, configured ``WorktreeCreate`` / ``WorktreeRemove`` hooks do the
isolation (``subagents.worktrees.commands``, whose ``create_isolated`` is the entry point for
``isolation: "worktree"``); listing and removing what children left is
``subagents.worktrees.admin``.

All git work runs as ``git`` subprocesses without a shell, with ``GIT_DIR``-style variables of
the runtime's own environment removed so they cannot redirect git to another repository.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from subagents.processes import kill_group

WORKTREES_DIR: Final = Path(".subagents") / "worktrees"
"""Where worktrees live, relative to the repository root."""

EXCLUDE_LINE: Final = "/.subagents/worktrees/"
"""The line added to ``info/exclude`` so worktrees never show in ``git status``."""

BRANCH_PREFIX: Final = "subagents/"
METADATA_FILE: Final = "subagents.json"
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_SCRUBBED_GIT_VARS: Final = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
)
_CLEANUP_TIMEOUT_S: Final = 30.0


class WorktreeError(Exception):
    """Creating, inspecting or removing a worktree failed; the message says what and why."""


class NotAGitRepository(WorktreeError):
    """``cwd`` is not inside a git working tree (the hook-based path may apply)."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Worktree:
    """One created worktree. Stored in the child's sidecar so recovery can settle it."""

    path: Path
    name: str
    branch: str | None = None
    """None for a hook-based worktree."""
    repo_root: Path | None = None
    head_commit: str | None = None
    """The commit the branch was made from: "changed" means commits beyond it."""
    base_ref: str | None = None
    """The branch HEAD was on (``refs/heads/main``); None when HEAD was detached."""
    agent_id: str | None = None
    hook_based: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe form for durable records."""
        return {
            "path": str(self.path),
            "name": self.name,
            "branch": self.branch,
            "repoRoot": None if self.repo_root is None else str(self.repo_root),
            "headCommit": self.head_commit,
            "baseRef": self.base_ref,
            "agentId": self.agent_id,
            "hookBased": self.hook_based,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Worktree:
        """Inverse of ``to_dict``; raises ``WorktreeError`` naming a missing field."""
        try:
            path, name = Path(data["path"]), str(data["name"])
        except KeyError as exc:
            raise WorktreeError(f"worktree record: missing field {exc.args[0]!r}") from None
        root = data.get("repoRoot")
        return cls(
            path=path,
            name=name,
            branch=data.get("branch"),
            repo_root=None if root is None else Path(root),
            head_commit=data.get("headCommit"),
            base_ref=data.get("baseRef"),
            agent_id=data.get("agentId"),
            hook_based=bool(data.get("hookBased", False)),
        )


@dataclass(kw_only=True, frozen=True, slots=True)
class WorktreeOutcome:
    """What happened to a worktree at the end of its run."""

    kept: bool
    path: Path | None
    branch: str | None
    reason: str

    def result_fields(self) -> dict[str, str]:
        """``worktreePath`` / ``worktreeBranch`` for the child's result, when kept."""
        fields: dict[str, str] = {}
        if self.kept and self.path is not None:
            fields["worktreePath"] = str(self.path)
        if self.kept and self.branch is not None:
            fields["worktreeBranch"] = self.branch
        return fields

    def to_dict(self) -> dict[str, Any]:
        return {
            "kept": self.kept,
            "path": None if self.path is None else str(self.path),
            "branch": self.branch,
            "reason": self.reason,
        }


@dataclass(kw_only=True, frozen=True, slots=True)
class WorktreeChanges:
    """Work a removal would throw away."""

    uncommitted: int
    """Lines of ``git status --porcelain`` (modified, staged, untracked paths)."""
    commits: int
    """Commits beyond the base commit."""

    @property
    def any(self) -> bool:
        return self.uncommitted > 0 or self.commits > 0

    def describe(self) -> str:
        files = _plural(self.uncommitted, "uncommitted change")
        return f"{files} and {_plural(self.commits, 'new commit')}"


# -- git plumbing -------------------------------------------------------------------------------


@dataclass(kw_only=True, frozen=True, slots=True)
class _GitResult:
    code: int
    stdout: str
    stderr: str


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_GIT_VARS}
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return env


async def _git(*args: str, cwd: Path) -> _GitResult:
    """Run ``git ARGS`` in ``cwd``; a cancelled call kills git and its hooks, then re-raises."""
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *args,
            cwd=cwd,
            env=_git_env(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        raise WorktreeError(f"cannot run git in {cwd}: {exc}") from exc
    try:
        out, err = await proc.communicate()
    except BaseException:
        # Its own process group, so the repository's git hooks (post-checkout) die with it.
        kill_group(proc.pid, signal.SIGKILL)
        await asyncio.shield(proc.wait())
        raise
    code = proc.returncode if proc.returncode is not None else -1
    return _GitResult(
        code=code, stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace")
    )


async def git_output(*args: str, cwd: Path, what: str) -> str:
    """``git ARGS`` that must succeed; its stdout, or ``WorktreeError`` with git's stderr."""
    result = await _git(*args, cwd=cwd)
    if result.code != 0:
        detail = result.stderr.strip() or result.stdout.strip() or f"exit code {result.code}"
        raise WorktreeError(f"{what}: git {' '.join(args)}: {detail}")
    return result.stdout


async def find_repo_root(cwd: Path) -> Path:
    """The top of the working tree holding ``cwd``; ``NotAGitRepository`` outside one."""
    if not path_is_dir(cwd):
        raise WorktreeError(f"working directory does not exist: {cwd}")
    result = await _git("rev-parse", "--show-toplevel", cwd=cwd)
    if result.code != 0 or not result.stdout.strip():
        raise NotAGitRepository(f"not a git repository: {cwd}: {result.stderr.strip()}")
    return Path(result.stdout.strip())


# -- names and paths ----------------------------------------------------------------------------


def agent_worktree_name(agent_id: str) -> str:
    """``agent-<first 8 of the id>``."""
    return f"agent-{agent_id[:8]}"


def check_name(name: str) -> str:
    """A name usable as a folder and a branch component; ``WorktreeError`` otherwise."""
    ok = (
        0 < len(name) <= 64
        and set(name) <= _NAME_CHARS
        and name[0] not in ".-"
        and ".." not in name
        and not name.endswith((".lock", "."))
    )
    if not ok:
        raise WorktreeError(
            f"invalid worktree name {name!r}: use 1-64 letters, digits, '.', '_' or '-', "
            "not starting with '.' or '-'"
        )
    return name


def random_session_name() -> str:
    return f"session-{secrets.token_hex(4)}"


def working_dir_in(info: Worktree, original_cwd: Path) -> Path:
    """Where to work inside ``info``: the same sub-folder ``original_cwd`` was in, if present."""
    if info.repo_root is None:
        return info.path
    try:
        relative = original_cwd.resolve().relative_to(info.repo_root.resolve())
    except ValueError:
        return info.path
    candidate = info.path / relative
    return candidate if candidate.is_dir() else info.path


def isolated_roots(roots: Sequence[Path], old_cwd: Path, worktree: Path) -> tuple[Path, ...]:
    """File-tool roots for work in ``worktree``: the roots holding ``old_cwd`` are replaced.

    Additional directories that do not contain the old working directory stay reachable, so
    a child confined this way can read and write its worktree but not the main checkout."""
    old = old_cwd.resolve()
    kept = tuple(r for r in roots if not old.is_relative_to(r.resolve()))
    return (worktree, *kept)


def _present(path: Path) -> bool:
    """A stat, kept out of async bodies for the linter; it does not block in any real sense."""
    return os.path.lexists(path)


def path_is_dir(path: Path) -> bool:
    return path.is_dir()


def _ensure_excluded(common_dir: Path) -> None:
    """Add ``EXCLUDE_LINE`` to ``info/exclude`` once (no await inside: atomic in the loop)."""
    exclude = common_dir / "info" / "exclude"
    text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    if EXCLUDE_LINE in text.splitlines():
        return
    exclude.parent.mkdir(parents=True, exist_ok=True)
    prefix = "" if not text or text.endswith("\n") else "\n"
    with exclude.open("a", encoding="utf-8") as handle:
        handle.write(f"{prefix}# subagents worktrees\n{EXCLUDE_LINE}\n")


# -- creation -----------------------------------------------------------------------------------


async def create_worktree(cwd: Path, agent_id: str) -> Worktree:
    """A worktree for agent ``agent_id`` on branch ``subagents/agent-<8>`` from HEAD."""
    return await create_named_worktree(cwd, agent_worktree_name(agent_id), agent_id=agent_id)


async def create_named_worktree(cwd: Path, name: str, *, agent_id: str | None = None) -> Worktree:
    """Create ``<root>/.subagents/worktrees/<name>`` on a new branch ``subagents/<name>``.

    Raises ``NotAGitRepository`` outside a repository and ``WorktreeError`` for every other
    failure, after removing whatever this call had created."""
    check_name(name)
    root = await find_repo_root(cwd)
    # git takes repository-wide locks (config, refs) while adding a worktree; parallel children
    # of one repository are created one at a time so none fails on another's lock.
    async with _repo_lock(root):
        return await _create_in(root, cwd, name, agent_id)


_REPO_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Path, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


def _repo_lock(root: Path) -> asyncio.Lock:
    """One lock per repository and event loop (an asyncio lock belongs to one loop)."""
    locks = _REPO_LOCKS.setdefault(asyncio.get_running_loop(), {})
    lock = locks.get(root)
    if lock is None:
        lock = locks[root] = asyncio.Lock()
    return lock


async def _create_in(root: Path, cwd: Path, name: str, agent_id: str | None) -> Worktree:
    head = await _head_commit(root)
    base_ref = await _symbolic_head(root)
    path = root / WORKTREES_DIR / name
    branch = BRANCH_PREFIX + name
    if _present(path):
        raise WorktreeError(f"cannot create worktree {name!r}: {path} already exists")
    if await _branch_exists(root, branch):
        raise WorktreeError(f"cannot create worktree {name!r}: branch {branch!r} already exists")
    common_out = await git_output(
        "rev-parse", "--path-format=absolute", "--git-common-dir", cwd=root, what="locating .git"
    )
    common = Path(common_out.strip())
    _ensure_excluded(common)
    info = Worktree(
        path=path,
        name=name,
        branch=branch,
        repo_root=root,
        head_commit=head,
        base_ref=base_ref,
        agent_id=agent_id,
    )
    try:
        await git_output(
            "worktree",
            "add",
            "-b",
            branch,
            str(path),
            head,
            cwd=root,
            what=f"creating worktree {name!r}",
        )
        await _write_metadata(info)
    except BaseException:
        await _shielded(_undo_create(root, path, branch))
        raise
    return info


async def _head_commit(root: Path) -> str:
    result = await _git("rev-parse", "--verify", "-q", "HEAD^{commit}", cwd=root)
    if result.code != 0 or not result.stdout.strip():
        raise WorktreeError(
            f"cannot create a worktree in {root}: HEAD has no commit yet; make a first commit"
        )
    return result.stdout.strip()


async def _symbolic_head(root: Path) -> str | None:
    result = await _git("symbolic-ref", "-q", "HEAD", cwd=root)
    return result.stdout.strip() or None if result.code == 0 else None


async def _branch_exists(root: Path, branch: str) -> bool:
    result = await _git("rev-parse", "--verify", "-q", f"refs/heads/{branch}", cwd=root)
    return result.code == 0


async def _admin_dir(path: Path) -> Path:
    out = await git_output("rev-parse", "--absolute-git-dir", cwd=path, what=f"inspecting {path}")
    return Path(out.strip())


async def _write_metadata(info: Worktree) -> None:
    admin = await _admin_dir(info.path)
    target = admin / METADATA_FILE
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(info.to_dict(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(target)


async def read_metadata(path: Path) -> dict[str, Any] | None:
    try:
        admin = await _admin_dir(path)
        data = json.loads((admin / METADATA_FILE).read_text(encoding="utf-8"))
    except (WorktreeError, OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


async def _undo_create(root: Path, path: Path, branch: str) -> None:
    """Remove what a failed creation made; the clash checks guarantee none of it pre-existed."""
    if _present(path):
        await _git("worktree", "remove", "--force", "--force", str(path), cwd=root)
        if _present(path):
            await asyncio.to_thread(shutil.rmtree, path, True)
    await _git("worktree", "prune", cwd=root)
    if await _branch_exists(root, branch):
        await _git("branch", "-D", branch, cwd=root)


async def _shielded(coro: Any) -> None:
    """Run cleanup to completion even while the caller is being cancelled (time-bounded)."""
    task = asyncio.ensure_future(asyncio.wait_for(coro, _CLEANUP_TIMEOUT_S))
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await task
        raise
    except (TimeoutError, WorktreeError):
        pass


# -- inspection and the end of a run -----------------------------------------------------------


async def worktree_changes(
    path: Path, base_commit: str | None, branch: str | None
) -> WorktreeChanges:
    """Uncommitted paths in ``path`` and commits beyond ``base_commit`` (on HEAD or the branch).

    Without a known base, commits are those of the branch on no other branch."""
    status = await git_output("status", "--porcelain", cwd=path, what=f"inspecting {path}")
    uncommitted = len([line for line in status.splitlines() if line.strip()])
    commits = 0
    for tip in ("HEAD", f"refs/heads/{branch}" if branch else None):
        if tip is None:
            continue
        commits = max(commits, await _count_commits(path, tip, base_commit, branch))
    return WorktreeChanges(uncommitted=uncommitted, commits=commits)


async def _count_commits(cwd: Path, tip: str, base: str | None, branch: str | None) -> int:
    if base is not None:
        args: tuple[str, ...] = ("rev-list", "--count", f"{base}..{tip}")
    else:
        exclude = f"--exclude=refs/heads/{branch}" if branch else "--exclude=HEAD"
        args = ("rev-list", "--count", tip, "--not", exclude, "--branches")
    out = await git_output(*args, cwd=cwd, what=f"counting commits in {cwd}")
    return int(out.strip() or "0")


async def finish_worktree(info: Worktree, *, success: bool) -> WorktreeOutcome:
    """Apply the end-of-run rule: remove only after a success that changed nothing."""
    kept = WorktreeOutcome(kept=True, path=info.path, branch=info.branch, reason="")
    if info.hook_based:
        return _with_reason(kept, "created by a WorktreeCreate hook; hook-based worktrees are kept")
    if info.repo_root is None or info.branch is None:
        return _with_reason(kept, "incomplete worktree record; kept for inspection")
    if not path_is_dir(info.path):
        return await _finish_missing(info, success=success)
    try:
        changes = await worktree_changes(info.path, info.head_commit, info.branch)
    except WorktreeError as exc:
        return _with_reason(kept, f"could not inspect the worktree, kept: {exc}")
    if not success:
        return _with_reason(kept, f"the run did not succeed ({changes.describe()})")
    if changes.any:
        return _with_reason(kept, f"the worktree has {changes.describe()}")
    try:
        await remove_checkout(info.repo_root, info.path, info.branch)
    except WorktreeError as exc:
        return _with_reason(kept, f"removal failed, kept: {exc}")
    return WorktreeOutcome(kept=False, path=None, branch=None, reason="no changes; removed")


async def _finish_missing(info: Worktree, *, success: bool) -> WorktreeOutcome:
    """The folder is gone (removed by hand, or by us before a crash): settle the branch."""
    assert info.repo_root is not None
    assert info.branch is not None
    await _git("worktree", "prune", cwd=info.repo_root)
    if not await _branch_exists(info.repo_root, info.branch):
        return WorktreeOutcome(kept=False, path=None, branch=None, reason="already removed")
    commits = await _count_commits(
        info.repo_root, f"refs/heads/{info.branch}", info.head_commit, info.branch
    )
    if success and commits == 0:
        await git_output("branch", "-D", info.branch, cwd=info.repo_root, what="deleting branch")
        return WorktreeOutcome(
            kept=False, path=None, branch=None, reason="folder gone; branch removed"
        )
    return WorktreeOutcome(
        kept=True,
        path=None,
        branch=info.branch,
        reason=f"folder gone; branch kept ({_plural(commits, 'new commit')})",
    )


async def remove_checkout(root: Path, path: Path, branch: str | None) -> None:
    """``git worktree remove --force``, then the branch, then prune stale admin entries."""
    if _present(path):
        await git_output(
            "worktree", "remove", "--force", str(path), cwd=root, what=f"removing worktree {path}"
        )
    await _git("worktree", "prune", cwd=root)
    if branch is not None and await _branch_exists(root, branch):
        await git_output("branch", "-D", branch, cwd=root, what=f"deleting branch {branch}")


async def discard_worktree(info: Worktree) -> None:
    """Remove a git worktree and its branch whatever they hold: the caller chose to discard."""
    if info.hook_based or info.repo_root is None:
        raise WorktreeError(f"{info.path} is not a git worktree made by subagents")
    await remove_checkout(info.repo_root, info.path, info.branch)


async def settle_orphan(
    info_dict: Mapping[str, Any], *, completed: bool = False
) -> WorktreeOutcome:
    """Recovery for a child that died: kept, unless it had completed and changed nothing."""
    return await finish_worktree(Worktree.from_dict(info_dict), success=completed)


def _with_reason(outcome: WorktreeOutcome, reason: str) -> WorktreeOutcome:
    return WorktreeOutcome(
        kept=outcome.kept, path=outcome.path, branch=outcome.branch, reason=reason
    )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
