"""Agent memory: ``memory: user|project|local`` gives an agent type a folder that outlives runs.

Layout (Claude Code's, docs/compaction.md §7): ``<base>/agent-memory/<type>/`` for ``user`` and
``project``, ``<base>/agent-memory-local/<type>/`` for ``local``, where ``<base>`` is
``~/.claude`` (user) or ``<project>/.claude`` — or, for a definition that lives in one of our
``.subagents/agents`` folders, ``$SUBAGENTS_HOME`` / ``<project>/.subagents``: the memory stays
beside the family of folders its definition came from. The index, ``MEMORY.md``, is read at the
start (bounded: 200 lines, 25,000 bytes) into the agent's system prompt.

Access: the folder becomes one of the child's confinement roots, and ``memory_guard`` lets the
file tools work inside it whatever the child's mode would say (deny rules still win); file tools
the child only holds *because* of its memory (Read/Write/Edit added to a child that lacked them)
work only there.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from subagents.agents.definitions import find_project_root
from subagents.agents.schema import AgentDefinition
from subagents.permissions.checker import PermissionChecker
from subagents.permissions.decision import decide
from subagents.permissions.rules import tool_path
from subagents.tools.base import ALLOW, CanUseTool, PermissionResult, Tool, ToolContext
from subagents.tools.paths import is_inside

INDEX_FILE = "MEMORY.md"
INDEX_MAX_LINES = 200
INDEX_MAX_BYTES = 25_000
MEMORY_TOOLS = ("Read", "Write", "Edit")
"""Tools a memory agent is given if it lacks them (working only inside its folder)."""
_FILE_TOOLS = frozenset({"Read", "Write", "Edit", "Glob", "Grep"})
_SCOPES = {
    "user": "user scope: yours in every project, not in version control",
    "project": "project scope: kept in this project and shared through version control",
    "local": "local scope: this project only, not to be checked in",
}
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class MemoryFolderError(ValueError):
    """The memory folder cannot be used (it leads outside its base, it is not a folder)."""


@dataclass(kw_only=True, frozen=True)
class AgentMemory:
    """One agent's memory: where it is and the index as loaded at the start."""

    scope: str
    folder: Path
    """Resolved; created at the start."""
    index: str = ""
    index_truncated: bool = False

    @property
    def index_path(self) -> Path:
        return self.folder / INDEX_FILE

    def prompt_block(self, agent_type: str) -> str:
        """The system-prompt section: what the folder is, how to keep it, the index."""
        where = _SCOPES.get(self.scope, self.scope)
        index = self.index.rstrip() or f"({INDEX_FILE} does not exist yet: create it.)"
        if self.index_truncated:
            index += (
                f"\n[... {INDEX_FILE} is longer than {INDEX_MAX_LINES} lines or "
                f"{INDEX_MAX_BYTES:,} bytes; only this much is loaded: move details into topic "
                "files and keep the index short ...]"
            )
        return (
            "# Persistent agent memory\n\n"
            f"You have a persistent memory folder, {self.folder} ({where}). What you write "
            f"there is still there the next time an agent of your type ({agent_type}) runs, "
            f"and its index, {INDEX_FILE}, is shown to you below at every start.\n\n"
            "- Before starting, look in the index for notes that bear on this task, and read "
            "the topic files it points to when they are relevant.\n"
            "- When you learn something that will help later runs (conventions, decisions and "
            "why, pitfalls, where things are), record it: details in topic files of this "
            f"folder, and one short line per note in {INDEX_FILE} pointing to them.\n"
            f"- Keep {INDEX_FILE} under {INDEX_MAX_LINES} lines; correct or remove notes that "
            "turn out to be wrong; never store secrets.\n"
            "- You may Read, Write and Edit files in this folder whatever your other "
            "permissions are.\n\n"
            f"## {INDEX_FILE}\n\n{index}"
        )


def memory_base(
    definition: AgentDefinition,
    scope: str,
    *,
    cwd: Path,
    user_home: Path,
    subagents_home: Path,
) -> Path:
    """The folder the scope's memories live under (see the module docstring)."""
    ours = definition.path is not None and ".subagents" in Path(definition.path).parts
    if scope == "user":
        return subagents_home if ours else user_home / ".claude"
    project = _project_of(definition, cwd)
    return project / (".subagents" if ours else ".claude")


def _project_of(definition: AgentDefinition, cwd: Path) -> Path:
    """The project a project/local memory belongs to: the definition file's own project when
    it is a project definition, else the folder project definitions are found in, else cwd."""
    if definition.source == "project" and definition.path is not None:
        path = Path(definition.path)
        for parent in path.parents:
            if parent.name in (".claude", ".subagents"):
                return parent.parent
    return find_project_root(cwd) or cwd


def folder_name(agent_type: str) -> str:
    """The agent type as one safe path component (a short hash marks a changed name)."""
    safe = _SAFE.sub("-", agent_type).strip(".-")
    if safe == agent_type and safe:
        return safe
    digest = hashlib.sha256(agent_type.encode()).hexdigest()[:8]
    return f"{safe or 'agent'}-{digest}"


def open_memory(
    definition: AgentDefinition,
    scope: str,
    *,
    cwd: Path,
    user_home: Path,
    subagents_home: Path,
    load_index: bool = True,
) -> AgentMemory:
    """Check and create (if needed) the memory folder; read its index. ``MemoryFolderError``
    when the folder leads outside where it must be (a symlink) or cannot be made.

    Where it must be: inside its base (``.claude``, ``.subagents``), and for ``project`` and
    ``local`` the base inside the project — a repository's own ``.claude`` that is a symlink
    out of it is refused, and nothing is created through it; for ``user`` the base is the
    user's own (``~/.claude``, ``$SUBAGENTS_HOME``), which may itself be a link of theirs. Each
    folder on the way is made and opened by descriptor, relative to its parent's
    (``_open_inside``): the check is of the folder actually opened, before anything is made in
    it, so no link swapped in meanwhile can lead a ``mkdir`` elsewhere."""
    if scope not in _SCOPES:
        raise MemoryFolderError(f"memory: {scope!r} is not one of user, project, local")
    base = memory_base(
        definition, scope, cwd=cwd, user_home=user_home, subagents_home=subagents_home
    )
    kind = "agent-memory-local" if scope == "local" else "agent-memory"
    parts: tuple[str, ...] = (kind, folder_name(definition.name))
    folder = base.joinpath(*parts)
    try:
        if scope == "user":
            base.mkdir(parents=True, exist_ok=True)
            anchor, base_parts = base.resolve(strict=True), 0
        else:
            anchor, parts, base_parts = base.parent.resolve(strict=True), (base.name, *parts), 1
        resolved = _open_inside(anchor, parts, base_parts=base_parts)
    except _Outside:
        raise MemoryFolderError(
            f"memory folder {folder} leads outside {anchor} (a symlink); not used"
        ) from None
    except OSError as exc:
        raise MemoryFolderError(f"memory folder {folder} cannot be used: {exc}") from None
    if not load_index:
        return AgentMemory(scope=scope, folder=resolved)
    index, truncated = read_index(resolved / INDEX_FILE)
    return AgentMemory(scope=scope, folder=resolved, index=index, index_truncated=truncated)


class _Outside(Exception):
    """A folder on the way is a symlink that leads out of the anchor."""


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _open_inside(anchor: Path, parts: tuple[str, ...], *, base_parts: int) -> Path:
    """Make (if missing) and open each of ``parts`` below ``anchor`` in turn, relative to the
    descriptor of the one before, never by a path. A part that is a symlink is followed only
    where the folder it opened is still inside the root (read from ``/proc/self/fd``; where
    there is none, not at all): the root is ``anchor`` for the first ``base_parts`` (the scope's
    base, ``.claude``), then the base as opened, so a link below the base cannot lead to the
    rest of the project either. ``_Outside`` when one is not inside; OSError when one cannot be
    made or is not a folder. The real path of the last."""
    root = anchor
    fd = os.open(anchor, _DIRECTORY)
    try:
        for number, part in enumerate(parts):
            try:
                os.mkdir(part, dir_fd=fd)  # never through a link: one in the way is EEXIST
            except FileExistsError:
                pass
            try:
                child = os.open(part, _DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                # A link is ELOOP, or ENOTDIR with O_DIRECTORY (Linux): which, ask the entry.
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR) or not _is_link(part, fd):
                    raise
                child = os.open(part, _DIRECTORY, dir_fd=fd)
                real = _real_path(child)
                if real is None or not is_inside(real, root):
                    os.close(child)
                    raise _Outside from None
            os.close(fd)
            fd = child
            if number + 1 == base_parts:
                root = _real_path(fd) or root.joinpath(*parts[:base_parts])
        return _real_path(fd) or anchor.joinpath(*parts)
    finally:
        os.close(fd)


def _is_link(name: str, dir_fd: int) -> bool:
    return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)


def _real_path(fd: int) -> Path | None:
    """Where the folder open as ``fd`` is (Linux's ``/proc``), else None."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


def read_index(path: Path) -> tuple[str, bool]:
    """The first 200 lines / 25,000 bytes of a regular file (no symlink, no FIFO), and whether
    there was more; ("", False) when there is none."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:
        return "", False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "", False
        data = os.read(fd, INDEX_MAX_BYTES + 1)
    except OSError:
        return "", False
    finally:
        os.close(fd)
    truncated = len(data) > INDEX_MAX_BYTES
    lines = data[:INDEX_MAX_BYTES].decode("utf-8", errors="replace").splitlines()
    if len(lines) > INDEX_MAX_LINES:
        lines, truncated = lines[:INDEX_MAX_LINES], True
    return "\n".join(lines), truncated


def memory_guard(
    check: CanUseTool | None,
    memory: AgentMemory,
    *,
    checker: PermissionChecker | None,
    memory_only: frozenset[str],
) -> CanUseTool:
    """``check`` with the memory rule in front of it (see the module docstring)."""
    folder = memory.folder

    async def guarded(tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> PermissionResult:
        path = tool_path(args, ctx.cwd) if tool.name in _FILE_TOOLS else None
        if path is not None and is_inside(path, folder):
            return _inside(tool, args, ctx, checker)
        if tool.name in memory_only:
            return PermissionResult(
                behavior="deny",
                message=(
                    f"{tool.name} is available to this agent only for its memory folder "
                    f"{folder}; use it there."
                ),
            )
        return ALLOW if check is None else await check(tool, args, ctx)

    return guarded


def _inside(
    tool: Tool[Any], args: BaseModel, ctx: ToolContext, checker: PermissionChecker | None
) -> PermissionResult:
    """A file call inside the memory folder: allowed unless a deny rule names it."""
    if checker is None:
        return ALLOW
    rules_only = replace(checker.context, mode="bypassPermissions", ask=(), tools=None)
    decision = decide(rules_only, tool, args, ctx)
    if decision.behavior == "deny":
        return PermissionResult(behavior="deny", message=decision.message)
    return ALLOW


def with_memory_tools(
    tools: list[Tool[Any]], pool: list[Tool[Any]]
) -> tuple[list[Tool[Any]], frozenset[str]]:
    """``tools`` plus the ``MEMORY_TOOLS`` it lacks (taken from ``pool``), and their names."""
    have = {tool.name for tool in tools}
    by_name = {tool.name: tool for tool in pool}
    added = [by_name[name] for name in MEMORY_TOOLS if name not in have and name in by_name]
    return [*tools, *added], frozenset(tool.name for tool in added)
