"""``subagents worktrees list|remove``: see and clean the worktrees children left behind.

A child's worktree is kept when it failed or changed something (SPEC §10); this is how the user
finds those worktrees and removes them once merged or no longer wanted. Only our worktrees
(under ``.subagents/worktrees/``) are listed or removed, never the user's own. ``remove`` refuses
a worktree holding uncommitted changes or new commits unless ``--force`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from subagents.worktrees.admin import (
    WorktreeEntry,
    find_entry,
    list_worktrees,
    remove_worktree,
)
from subagents.worktrees.git import (
    WorktreeError,
    find_repo_root,
    worktree_changes,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``worktrees`` subcommand; its parser sets ``handler=run``."""
    parser = subparsers.add_parser("worktrees", help="list and remove sub-agent worktrees")
    parser.set_defaults(handler=run, worktrees_command=None)
    actions = parser.add_subparsers(dest="worktrees_command", metavar="{list,remove}")
    list_parser = actions.add_parser("list", help="worktrees left by sub-agents, with changes")
    list_parser.add_argument("--json", action="store_true", help="print a JSON list")
    remove_parser = actions.add_parser("remove", help="remove a worktree and its branch")
    remove_parser.add_argument("target", metavar="PATH_OR_NAME", help="folder or name")
    remove_parser.add_argument(
        "--force", action="store_true", help="also when it has uncommitted changes or commits"
    )
    for sub in (list_parser, remove_parser):
        # SUPPRESS: a subcommand default would overwrite the same option given before the command.
        sub.add_argument("--cwd", default=argparse.SUPPRESS, help="a folder inside the repository")


def run(args: argparse.Namespace) -> int:
    """Run ``worktrees <command>``; the return value is the exit code."""
    command = getattr(args, "worktrees_command", None)
    cwd = Path(getattr(args, "cwd", None) or Path.cwd())
    try:
        if command == "list":
            return asyncio.run(_list(cwd, as_json=args.json, out=sys.stdout))
        if command == "remove":
            return asyncio.run(_remove(cwd, args.target, force=args.force, out=sys.stdout))
    except WorktreeError as exc:
        print(f"subagents worktrees: {exc}", file=sys.stderr)
        return 1
    print("usage: subagents worktrees {list,remove} ...", file=sys.stderr)
    return 2


async def _list(cwd: Path, *, as_json: bool, out: TextIO) -> int:
    root = await find_repo_root(cwd)
    rows = [await _describe(entry) for entry in await list_worktrees(root)]
    if as_json:
        print(json.dumps(rows, indent=2), file=out)
        return 0
    if not rows:
        print("no sub-agent worktrees", file=out)
    for row in rows:
        print(f"{row['name']}\t{row['branch'] or '-'}\t{_status(row)}\t{row['path']}", file=out)
    return 0


async def _describe(entry: WorktreeEntry) -> dict[str, Any]:
    """One JSON row; changes are counted only for a folder that still exists."""
    row: dict[str, Any] = {
        "name": entry.name,
        "path": str(entry.path),
        "branch": entry.branch,
        "head": entry.head,
        "baseCommit": entry.base_commit,
        "agentId": entry.agent_id,
        "exists": entry.exists,
        "locked": entry.locked,
        "uncommitted": None,
        "commits": None,
    }
    if entry.exists:
        try:
            changes = await worktree_changes(entry.path, entry.base_commit, entry.branch)
        except WorktreeError:
            return row
        row.update(uncommitted=changes.uncommitted, commits=changes.commits)
    return row


def _status(row: dict[str, Any]) -> str:
    if not row["exists"]:
        return "missing (prunable)"
    if row["uncommitted"] is None:
        return "unknown"
    if not row["uncommitted"] and not row["commits"]:
        return "clean"
    return f"{row['uncommitted']} uncommitted, {row['commits']} commits"


async def _remove(cwd: Path, target: str, *, force: bool, out: TextIO) -> int:
    root = await find_repo_root(cwd)
    entry = await find_entry(root, target, base=cwd)
    removed = await remove_worktree(entry.path, force=force)
    branch = f" and branch {removed.branch}" if removed.branch else ""
    print(f"removed worktree {removed.path}{branch}", file=out)
    return 0
