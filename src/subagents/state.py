"""Where state lives: ``SUBAGENTS_HOME`` and the per-project folder derived from a canonical path.

Layout under a project folder (``<home>/projects/<slug>``)::

    sessions/<session_id>.jsonl   the main agent's transcript of a session
    sessions/<session_id>.lock    held (flock) while a process runs the session
    agents/<agent_id>.jsonl       a child's transcript
    agents/<agent_id>.json        a child's sidecar record (durability)
    tasks/<task_id>.output        a background task's output file

Directories are created ``0700`` and files ``0600``: transcripts hold prompts and tool output.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path


def subagents_home(user_home: Path | None = None) -> Path:
    """``SUBAGENTS_HOME`` (``~`` expanded) or ``<user_home>/.subagents`` (the user's home by
    default); not created here (importing does no I/O). The one place this rule lives: the
    store, definitions and settings all look in the same folder."""
    raw = os.environ.get("SUBAGENTS_HOME")
    if raw:
        return Path(raw).expanduser()
    return (user_home if user_home is not None else Path.home()) / ".subagents"


def canonical_project(cwd: Path) -> Path:
    """The canonical project path: symlinks resolved, so two spellings share one state folder."""
    return Path(os.path.realpath(cwd))


def project_slug(project: Path) -> str:
    readable = re.sub(r"[^A-Za-z0-9]+", "-", str(project)).strip("-")[-48:]
    digest = hashlib.sha256(str(project).encode()).hexdigest()[:10]
    return f"{readable}-{digest}"


@dataclass(kw_only=True, frozen=True)
class ProjectState:
    """Paths of one project's state folder."""

    home: Path
    project: Path

    @classmethod
    def for_cwd(cls, cwd: Path, home: Path | None = None) -> ProjectState:
        return cls(home=home or subagents_home(), project=canonical_project(cwd))

    @functools.cached_property
    def root(self) -> Path:
        # Cached: every child's transcript, sidecar and output path starts here, and the slug
        # costs a hash and a regex.
        return self.home / "projects" / project_slug(self.project)

    @property
    def sessions_dir(self) -> Path:
        return self.root / "sessions"

    @property
    def agents_dir(self) -> Path:
        return self.root / "agents"

    @property
    def tasks_dir(self) -> Path:
        return self.root / "tasks"

    def session_transcript(self, session_id: str) -> Path:
        return self.sessions_dir / f"{session_id}.jsonl"

    def session_lock(self, session_id: str) -> Path:
        """Held by the process running the session (``store.session_lock``)."""
        return self.sessions_dir / f"{session_id}.lock"

    def agent_transcript(self, agent_id: str) -> Path:
        return self.agents_dir / f"{agent_id}.jsonl"


_ENSURED: set[Path] = set()


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) with mode 0700; tighten an existing one we own.

    A directory made private once in this process is remembered, so the hundreds of children
    of a session do not each pay a ``mkdir`` and a ``stat`` for the same folder."""
    if path in _ENSURED and path.is_dir():
        return path
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        if path.stat().st_mode & 0o077:
            path.chmod(0o700)
    except OSError:
        pass
    _ENSURED.add(path)
    return path
