"""The project context a system prompt carries: instruction files, a git snapshot, the date.

Instruction files are found the way Claude Code finds its memory files:

* user level: ``~/.claude/CLAUDE.md`` (instructions for every project);
* from the filesystem root down to the working directory, in every folder: ``CLAUDE.md``,
  ``.claude/CLAUDE.md`` and ``AGENTS.md`` (shared with the project), then ``CLAUDE.local.md``
  (private to this checkout) — nearer folders last, so they read as the more specific;
* ``@path`` references inside a file import another file (relative to the including file,
  ``~/`` for home, absolute allowed), at most ``MAX_IMPORT_DEPTH`` levels deep, each file once
  (a cycle stops at the repeat); references inside code spans and fenced blocks are text.

Only regular files are read (no FIFO, device or directory, whatever a symlink points at), each at
most ``MAX_FILE_CHARS``, all together at most ``MAX_INSTRUCTIONS_CHARS``. Full-capability agents
get the instructions and a git status snapshot taken once per session; read-only agents (Explore,
Plan) get neither (SPEC §2). Everything here is computed once and reused, so every request of the
session carries the same bytes (prompt-cache friendly).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from subagents.processes import read_output
from subagents.runtime_tags import escape_runtime_tags

log = logging.getLogger(__name__)

SHARED_FILES = ("CLAUDE.md", ".claude/CLAUDE.md", "AGENTS.md")
LOCAL_FILES = ("CLAUDE.local.md",)
MAX_FILE_CHARS = 20_000
MAX_INSTRUCTIONS_CHARS = 40_000
MAX_IMPORT_DEPTH = 5
MAX_GIT_STATUS_CHARS = 2_000
GIT_SNAPSHOT_SECONDS = 10.0
"""How long the session start waits for the git snapshot's commands before it goes on without
it: a repository's config can make ``git status`` wait on a command of its choosing
(``core.fsmonitor``), a network file system can hang, and neither may hold the session."""
INSTRUCTIONS_INTRO = (
    "The user and the project gave the instructions below. They take precedence over the "
    "general guidance above: follow them exactly."
)
_IMPORT = re.compile(r"(?<![\w`])@((?:~/|/|\./|\.\./)?[\w.\-/]+(?:\.[\w]+)?)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"`[^`]*`")


@dataclass(kw_only=True, frozen=True)
class ProjectContext:
    """Facts taken once at session start."""

    instructions: str
    git_status: str
    is_git: bool = False
    date: str = field(default_factory=lambda: datetime.date.today().isoformat())

    def render(self, *, read_only: bool) -> str:
        """The block appended to a system prompt; empty for read-only agents."""
        if read_only:
            return ""
        parts: list[str] = []
        if self.instructions:
            parts.append(
                f"<project_instructions>\n{INSTRUCTIONS_INTRO}\n\n{self.instructions}\n"
                "</project_instructions>"
            )
        if self.git_status:
            parts.append(f"<git_status>\n{self.git_status}\n</git_status>")
        return "\n\n".join(parts)


async def load_project_context(
    cwd: Path, *, home: Path | None = None, warn: Callable[[str], None] | None = None
) -> ProjectContext:
    status = await _git_status(cwd) if _may_be_in_git(cwd) else None
    return ProjectContext(
        instructions=load_instructions(cwd, Path.home() if home is None else home, warn=warn),
        git_status=status or "",
        is_git=status is not None,
    )


def load_instructions(cwd: Path, home: Path, *, warn: Callable[[str], None] | None = None) -> str:
    """Every instruction file in Claude Code's order, imports expanded, bounded in size.

    A file found in a folder (a cloned repository's ``CLAUDE.md``) and what it imports must
    resolve inside that folder or the working directory: ``@~/.ssh/id_rsa``, ``@../../x`` or
    a ``CLAUDE.md`` that is a symlink to a file elsewhere would send that file's text to the
    model's provider. Such a file is skipped with a warning (Claude Code asks before loading
    "external imports"); the user's own ``~/.claude/CLAUDE.md`` may import from anywhere."""
    found = _Found(home=home, warn=warn or log.warning)
    found.add(home / ".claude" / "CLAUDE.md", "user instructions for every project", None, 0)
    work = _resolved(cwd)
    for folder in [*reversed(cwd.parents), cwd]:
        where = (_resolved(folder), work)
        for name in SHARED_FILES:
            found.add(folder / name, "project instructions", where, 0)
        for name in LOCAL_FILES:
            found.add(folder / name, "private instructions for this checkout", where, 0)
    texts = found.texts
    joined = "\n\n".join(texts)
    if len(joined) > MAX_INSTRUCTIONS_CHARS:
        joined = joined[:MAX_INSTRUCTIONS_CHARS] + "\n… (instructions truncated)"
    return joined


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path


@dataclass
class _Found:
    """The instruction texts read so far, and the files already read (by resolved path)."""

    home: Path
    warn: Callable[[str], None]
    seen: set[Path] = field(default_factory=set)
    texts: list[str] = field(default_factory=list)

    def add(
        self, path: Path, label: str, inside: tuple[Path, ...] | None, depth: int, by: str = ""
    ) -> None:
        """Read ``path`` and what it imports; ``inside``: the folders it must resolve in (None:
        anywhere, the user's own file and its imports)."""
        body = self.read(path, inside, by)
        if body is None:
            return
        self.texts.append(f"Contents of {path} ({label}):\n{body}")
        if depth >= MAX_IMPORT_DEPTH:
            return
        for target in imports_of(body, path.parent, self.home):
            self.add(target, f"imported by {path}", inside, depth + 1, by=f"{path}: import ")

    def read(self, path: Path, inside: tuple[Path, ...] | None, by: str) -> str | None:
        """The file's text if it is a regular file not read before (by its resolved path)."""
        try:
            # Most candidates (a CLAUDE.md per parent folder) do not exist: one stat answers,
            # where resolving first cost an lstat per path component (~0.5 ms a session).
            if not stat.S_ISREG(os.stat(path).st_mode):
                return None
            resolved = path.resolve()
        except (OSError, RuntimeError):  # missing, or a symlink loop
            return None
        if inside is not None and not any(resolved.is_relative_to(f) for f in inside):
            self.warn(
                f"{by}{path}: skipped: it resolves to {resolved}, outside {inside[0]} and the "
                "working directory; a project's instruction files may not bring in other "
                "files (import it from ~/.claude/CLAUDE.md to use it)"
            )
            return None
        return _read_new(path, resolved, self.seen)


def _read_new(path: Path, resolved: Path, seen: set[Path]) -> str | None:
    if resolved in seen:
        return None
    seen.add(resolved)
    raw = _read_if_regular(resolved, MAX_FILE_CHARS * 4 + 1)
    if raw is None:
        return None
    text = raw.decode("utf-8", errors="replace").strip()
    if len(text) > MAX_FILE_CHARS:
        text = text[:MAX_FILE_CHARS] + f"\n… ({path} truncated)"
    return text


def _read_if_regular(path: Path, size: int) -> bytes | None:
    """Up to ``size`` bytes of ``path`` if what is opened is a regular file (checked on the
    descriptor: a file swapped for a FIFO after a look at it is not read). ``O_NONBLOCK``: the
    open of a FIFO would otherwise wait for a writer, for ever; a regular file ignores it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        parts: list[bytes] = []
        left = size
        while left > 0 and (part := os.read(fd, left)):
            parts.append(part)
            left -= len(part)
        return b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)


def imports_of(text: str, base: Path, home: Path) -> list[Path]:
    """Paths named by ``@path`` references outside code spans and fenced blocks."""
    found: list[Path] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in _IMPORT.finditer(_CODE_SPAN.sub("", line)):
            raw = match.group(1).rstrip(".")
            if raw.startswith("~/"):
                found.append(home / raw[2:])
            elif raw.startswith("/"):
                found.append(Path(raw))
            elif "/" in raw or "." in raw:  # @name alone is a mention, not a file
                found.append(base / raw)
    return found


_GIT_OUTPUT_LIMIT = 4 * MAX_GIT_STATUS_CHARS + 64
"""Bytes of a command's output worth reading: the snapshot keeps MAX_GIT_STATUS_CHARS of it (a
work tree with a million untracked files is not read to its end)."""


async def _git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str | None:
    """A git command's output in ``cwd``, or None when it fails or cannot start. The snapshot
    never takes the index lock (``GIT_OPTIONAL_LOCKS=0``, what editors use for a background
    status): a session starting while the user commits must not make that commit fail, and a
    killed ``git status`` leaves no stale ``index.lock`` behind."""
    try:
        code, out = await read_output(
            ("git", "-C", str(cwd), *args), env or _git_env(), limit=_GIT_OUTPUT_LIMIT
        )
    except OSError:
        return None
    # Cut at the limit (code None): the command was answering, so it did not fail.
    return out.decode(errors="replace").rstrip() if code in (0, None) else None


def _git_env() -> dict[str, str]:
    return dict(os.environ, GIT_OPTIONAL_LOCKS="0")


def _may_be_in_git(cwd: Path) -> bool:
    """False only when git certainly sees no repository here: no ``.git`` in ``cwd`` or any
    parent, and no environment variable that points git elsewhere (most scratch folders: no
    ``git`` process just to hear "not a repository")."""
    if any(name in os.environ for name in ("GIT_DIR", "GIT_WORK_TREE")):
        return True
    return any(os.path.lexists(folder / ".git") for folder in (cwd, *cwd.parents))


async def _git_status(cwd: Path) -> str | None:
    """The snapshot of the work tree ``cwd`` is in, or None when it is in none (or git took
    longer than ``GIT_SNAPSHOT_SECONDS``: its processes are killed)."""
    try:
        async with asyncio.timeout(GIT_SNAPSHOT_SECONDS):
            return await _git_snapshot(cwd)
    except TimeoutError:
        log.warning(
            "git took more than %s s to describe %s: the session starts without its git status",
            GIT_SNAPSHOT_SECONDS,
            cwd,
        )
        return None


async def _git_snapshot(cwd: Path) -> str | None:
    """``_git_status`` without the bound: ``git status`` fails outside a work tree, so it
    answers that too (no ``rev-parse`` process first: each process costs the session a fork
    and a watcher thread)."""
    env = _git_env()
    status = await _git(cwd, "status", "--short", env=env)
    if status is None:
        return None
    # The other two only read: run side by side (one process's wait instead of two).
    async with asyncio.TaskGroup() as group:
        branch_task = group.create_task(
            _git(cwd, "branch", "--show-current", env=env), name="git-snapshot-branch"
        )
        log_task = group.create_task(
            _git(cwd, "log", "--oneline", "-n", "5", env=env), name="git-snapshot-log"
        )
    branch = branch_task.result() or "(detached)"
    status = status or "(clean)"
    log = log_task.result() or "(no commits)"
    text = (
        "This is the git status at the start of the session; it will not update.\n"
        f"Current branch: {branch}\n\nStatus:\n{status}\n\nRecent commits:\n{log}"
    )
    # Commit subjects, branch and file names are what a cloned repository chose: none may
    # close the block or open a runtime tag in the system prompt.
    text = escape_runtime_tags(text)[0]
    if len(text) > MAX_GIT_STATUS_CHARS:
        text = text[:MAX_GIT_STATUS_CHARS] + "\n… (truncated; run `git status` for more)"
    return text
