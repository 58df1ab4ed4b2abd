"""Isolation outside git: configured ``WorktreeCreate`` / ``WorktreeRemove`` command hooks.

Claude Code's contract, kept here: ``WorktreeCreate`` gets JSON on stdin with the requested
``name`` (also as ``worktree_name``) and prints the absolute path of the folder it made on
stdout (the last non-empty line counts, so a hook may log before it); ``WorktreeRemove`` gets
``worktree_path``. Several configured hooks must agree on one path. Hooks run with the same
clean environment as every other hook (``subagents.hooks.runner``). Such worktrees are always
kept at the end of a run: we cannot tell whether they hold work.

``create_isolated`` is the entry point for ``isolation: "worktree"``: git inside a repository
(even when hooks are configured), the hooks outside one, and a clear error with neither.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from subagents.hooks.config import HookConfig
from subagents.hooks.runner import clean_environment, run_hooks
from subagents.processes import ProcessTracker
from subagents.worktrees.git import (
    NotAGitRepository,
    Worktree,
    WorktreeError,
    agent_worktree_name,
    check_name,
    create_worktree,
)


async def create_isolated(
    cwd: Path,
    agent_id: str,
    *,
    hooks: HookConfig | None = None,
    session_id: str = "",
    processes: ProcessTracker | None = None,
) -> Worktree:
    """Git worktree inside a repository; outside one, the configured WorktreeCreate hooks."""
    try:
        return await create_worktree(cwd, agent_id)
    except NotAGitRepository:
        pass
    return await create_with_hooks(
        cwd, agent_id, hooks=hooks, session_id=session_id, processes=processes
    )


async def create_with_hooks(
    cwd: Path,
    agent_id: str | None,
    *,
    hooks: HookConfig | None,
    name: str | None = None,
    session_id: str = "",
    processes: ProcessTracker | None = None,
) -> Worktree:
    """Run the WorktreeCreate hooks (JSON ``{name, …}`` on stdin); each prints the path made."""
    commands = hooks.commands_for("WorktreeCreate", None) if hooks is not None else []
    if not commands:
        raise WorktreeError(f"not a git repository and no WorktreeCreate hook configured: {cwd}")
    name = check_name(name or agent_worktree_name(agent_id or secrets.token_hex(4)))
    payload = _hook_payload(
        "WorktreeCreate", cwd, session_id, name=name, worktree_name=name, agent_id=agent_id
    )
    runs = await run_hooks(
        commands, payload, cwd=cwd, env=clean_environment(cwd, os.environ), processes=processes
    )
    printed: set[str] = set()
    for run in runs:
        if run.exit_code != 0:
            why = run.error or run.stderr.strip() or ("timed out" if run.timed_out else "")
            raise WorktreeError(
                f"WorktreeCreate hook {run.command.command!r} failed (exit {run.exit_code}): {why}"
            )
        lines = [line.strip() for line in run.stdout.splitlines() if line.strip()]
        if lines:
            printed.add(lines[-1])
    path = _single_hook_path(printed)
    return Worktree(path=path, name=name, agent_id=agent_id, hook_based=True)


def _single_hook_path(printed: set[str]) -> Path:
    if not printed:
        raise WorktreeError("WorktreeCreate hooks printed no worktree path on stdout")
    if len(printed) > 1:
        raise WorktreeError(f"WorktreeCreate hooks printed different paths: {sorted(printed)}")
    path = Path(printed.pop())
    if not path.is_absolute() or not path.is_dir():
        raise WorktreeError(
            f"WorktreeCreate hook printed {str(path)!r}, not an existing absolute folder"
        )
    return path


async def remove_with_hooks(
    info: Worktree,
    *,
    hooks: HookConfig | None,
    session_id: str = "",
    processes: ProcessTracker | None = None,
) -> None:
    """Run the WorktreeRemove hooks with ``{worktree_path}``; an error if none or one fails."""
    commands = hooks.commands_for("WorktreeRemove", None) if hooks is not None else []
    if not commands:
        raise WorktreeError(f"no WorktreeRemove hook configured; {info.path} was kept")
    cwd = info.path.parent if info.path.parent.is_dir() else Path.cwd()
    payload = _hook_payload("WorktreeRemove", cwd, session_id, worktree_path=str(info.path))
    runs = await run_hooks(
        commands, payload, cwd=cwd, env=clean_environment(cwd, os.environ), processes=processes
    )
    for run in runs:
        if run.exit_code != 0:
            why = run.error or run.stderr.strip() or ("timed out" if run.timed_out else "")
            raise WorktreeError(f"WorktreeRemove hook {run.command.command!r} failed: {why}")


def _hook_payload(event: str, cwd: Path, session_id: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": session_id, "cwd": str(cwd), "hook_event_name": event, **fields}
