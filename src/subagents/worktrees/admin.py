"""Finding and removing the worktrees this runtime made (``subagents worktrees``, recovery).

Ours are the entries of ``git worktree list`` whose folder is ``…/.subagents/worktrees/<name>``;
a user's own worktrees elsewhere are never listed or touched. Removal without ``force`` refuses
a worktree that holds uncommitted changes or commits beyond its recorded base.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from subagents.worktrees.git import (
    WORKTREES_DIR,
    WorktreeError,
    git_output,
    path_is_dir,
    read_metadata,
    remove_checkout,
    worktree_changes,
)


@dataclass(kw_only=True, frozen=True, slots=True)
class WorktreeEntry:
    """One of our worktrees as ``git worktree list`` sees it, plus our metadata."""

    path: Path
    name: str
    branch: str | None
    head: str | None
    base_commit: str | None = None
    agent_id: str | None = None
    exists: bool = True
    locked: bool = False


def is_ours(path: Path) -> bool:
    """Whether ``path`` is a worktree folder of this runtime (``…/.subagents/worktrees/X``)."""
    return (
        path.parent.name == WORKTREES_DIR.name
        and path.parent.parent.name == WORKTREES_DIR.parent.name
    )


async def list_worktrees(repo_root: Path) -> list[WorktreeEntry]:
    """Our worktrees of the repository holding ``repo_root``, from ``git worktree list``."""
    out = await git_output(
        "worktree", "list", "--porcelain", cwd=repo_root, what="listing worktrees"
    )
    entries: list[WorktreeEntry] = []
    for record in _porcelain_records(out):
        path = Path(record.get("worktree", ""))
        if not is_ours(path):
            continue
        branch = record.get("branch", "").removeprefix("refs/heads/") or None
        meta = await read_metadata(path) if path_is_dir(path) else None
        entries.append(
            WorktreeEntry(
                path=path,
                name=path.name,
                branch=branch,
                head=record.get("HEAD"),
                base_commit=None if meta is None else meta.get("headCommit"),
                agent_id=None if meta is None else meta.get("agentId"),
                exists=path_is_dir(path),
                locked="locked" in record,
            )
        )
    return entries


def _porcelain_records(text: str) -> list[dict[str, str]]:
    records: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        if not line:
            if current:
                records.append(current)
            current = {}
            continue
        key, _, value = line.partition(" ")
        current[key] = value
    return records


async def find_entry(
    repo_root: Path, path_or_name: str, *, base: Path | None = None
) -> WorktreeEntry:
    """One of our worktrees by name or folder (relative to ``base``, default the process cwd);
    ``WorktreeError`` listing the known ones."""
    entries = await list_worktrees(repo_root)
    wanted = Path(path_or_name)
    for entry in entries:
        if entry.name == path_or_name:
            return entry
    candidate = wanted if wanted.is_absolute() else (base or Path.cwd()) / wanted
    for entry in entries:
        if _same(entry.path, candidate):
            return entry
    known = ", ".join(e.name for e in entries) or "none"
    raise WorktreeError(f"no subagents worktree {path_or_name!r} in {repo_root} (known: {known})")


def _same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


async def remove_worktree(path: Path, *, force: bool = False) -> WorktreeEntry:
    """Remove one of our worktrees and its branch; without ``force``, refuse to lose work."""
    if not is_ours(path):
        raise WorktreeError(f"not a subagents worktree (expected under {WORKTREES_DIR}): {path}")
    root = path.parent.parent.parent
    entry = await find_entry(root, str(path))
    if not force and entry.exists:
        changes = await worktree_changes(entry.path, entry.base_commit, entry.branch)
        if changes.any:
            raise WorktreeError(
                f"worktree {entry.path} has {changes.describe()}; use --force to discard them"
            )
    await remove_checkout(root, entry.path, entry.branch)
    return entry
