"""The project context an agent's system prompt carries: instruction files and a git snapshot.

Full-capability agents get the project's instruction files (``CLAUDE.md``, ``AGENTS.md``, from the
git root down to the working directory) and a git status snapshot taken once per session. Read-only
agents (Explore, Plan) get neither: they do not need commit conventions to read code, and they run
``git status`` themselves when they want fresh state. The snapshot is computed once and reused so
every request of the session carries the same bytes (prompt-cache friendly).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

INSTRUCTION_FILES = ("CLAUDE.md", "AGENTS.md")
MAX_INSTRUCTIONS_CHARS = 40_000
MAX_GIT_STATUS_CHARS = 2_000


@dataclass(kw_only=True, frozen=True)
class ProjectContext:
    instructions: str
    git_status: str

    def render(self, *, read_only: bool) -> str:
        """The block appended to a system prompt; empty for read-only agents."""
        if read_only:
            return ""
        parts: list[str] = []
        if self.instructions:
            parts.append(f"<project_instructions>\n{self.instructions}\n</project_instructions>")
        if self.git_status:
            parts.append(f"<git_status>\n{self.git_status}\n</git_status>")
        return "\n\n".join(parts)


async def load_project_context(cwd: Path) -> ProjectContext:
    root = await _git_root(cwd)
    return ProjectContext(
        instructions=_instructions(cwd, root or cwd),
        git_status=await _git_status(cwd) if root is not None else "",
    )


def _instructions(cwd: Path, root: Path) -> str:
    folders = [cwd, *cwd.parents]
    chain = [f for f in folders if f == root or root in f.parents][::-1] or [cwd]
    texts: list[str] = []
    for folder in chain:
        for name in INSTRUCTION_FILES:
            path = folder / name
            if path.is_file():
                try:
                    body = path.read_text(encoding="utf-8", errors="replace").strip()
                except OSError:
                    continue
                texts.append(f"Contents of {path}:\n{body}")
    return "\n\n".join(texts)[:MAX_INSTRUCTIONS_CHARS]


async def _git(cwd: Path, *args: str) -> str | None:
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *args,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        return None
    out, _ = await proc.communicate()
    return out.decode(errors="replace").strip() if proc.returncode == 0 else None


async def _git_root(cwd: Path) -> Path | None:
    if not _may_be_in_git(cwd):
        return None  # most scratch folders: no `git` process just to hear "not a repository"
    out = await _git(cwd, "rev-parse", "--show-toplevel")
    return Path(out) if out else None


def _may_be_in_git(cwd: Path) -> bool:
    """False only when git certainly sees no repository here: no ``.git`` in ``cwd`` or any
    parent, and no environment variable that points git elsewhere."""
    if any(name in os.environ for name in ("GIT_DIR", "GIT_WORK_TREE")):
        return True
    return any(os.path.lexists(folder / ".git") for folder in (cwd, *cwd.parents))


async def _git_status(cwd: Path) -> str:
    branch = await _git(cwd, "branch", "--show-current") or "(detached)"
    status = await _git(cwd, "status", "--short") or "(clean)"
    log = await _git(cwd, "log", "--oneline", "-n", "5") or "(no commits)"
    text = (
        "This is the git status at the start of the session; it will not update.\n"
        f"Current branch: {branch}\n\nStatus:\n{status}\n\nRecent commits:\n{log}"
    )
    if len(text) > MAX_GIT_STATUS_CHARS:
        text = text[:MAX_GIT_STATUS_CHARS] + "\n… (truncated; run `git status` for more)"
    return text
