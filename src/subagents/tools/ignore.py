"""Ignore files for the Python search (``walk.py``), read the way ``rg`` reads them.

Sources, lowest precedence first: ``.git/info/exclude`` of the repository, then in every folder
from the repository root down, its ``.gitignore`` and then its ``.ignore`` (a deeper file wins
over a shallower one, and within a folder ``.ignore`` wins over ``.gitignore``). Patterns are
gitignore patterns, matched by ``pathspec`` (``GitIgnoreSpec``: negation, anchoring, ``**``,
trailing ``/`` for folders). As with ``rg --no-require-git``, a ``.gitignore`` counts without a
git repository too.

Where the rules start: the nearest folder at or above the search folder that holds ``.git``;
without one, the allowed root holding the search folder. Ignore files are read only if they are
regular files under ``MAX_IGNORE_BYTES`` (an ignore FIFO must not hang a search), without
following a symlink.

A search folder named explicitly is searched even when an ignore rule above it excludes it
(``rg`` does the same): then only the ignore files inside it count.
"""

from __future__ import annotations

import os
import stat as stat_module
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

IGNORE_FILES = (".gitignore", ".ignore")
MAX_IGNORE_BYTES = 1024 * 1024


@dataclass(kw_only=True, slots=True)
class IgnoreRules:
    """The ignore specs in force below one folder; paths are relative to ``top``."""

    top: Path
    specs: list[tuple[str, GitIgnoreSpec]] = field(default_factory=list)
    """(folder relative to ``top``, "" for ``top`` itself; its spec), shallowest first."""

    def ignored(self, rel: str, *, is_dir: bool) -> bool:
        """Whether the path ``rel`` (relative to ``top``, ``/``-separated) is ignored."""
        verdict: bool | None = None
        for folder, spec in self.specs:
            if folder:
                if not rel.startswith(folder + "/"):
                    continue
                sub = rel[len(folder) + 1 :]
            else:
                sub = rel
            include = spec.check_file(sub + "/" if is_dir else sub).include
            if include is not None:
                verdict = include
        return bool(verdict)

    def add_folder(self, rel: str, directory_fd: int) -> int:
        """Read the ignore files of the folder ``rel`` (open as ``directory_fd``); returns how
        many specs were added, so the walk can drop them when it leaves the folder."""
        added = 0
        for name in IGNORE_FILES:
            spec = _read_spec(name, directory_fd)
            if spec is not None:
                self.specs.append((rel, spec))
                added += 1
        return added

    def drop(self, count: int) -> None:
        if count:
            del self.specs[-count:]


def rules_for(base: Path, root: Path) -> tuple[IgnoreRules, str]:
    """The rules in force at the search folder ``base`` (inside the allowed ``root``), and
    ``base`` relative to the rules' ``top``. ``base``'s own ignore files are not read here: the
    walk reads them when it enters ``base``, like every other folder."""
    top = _repository_root(base) or root
    rules = IgnoreRules(top=top)
    base_rel = base.relative_to(top).as_posix() if base != top else ""
    exclude = _read_path(top / ".git" / "info" / "exclude")
    if exclude is not None:
        rules.specs.append(("", exclude))
    parts = Path(base_rel).parts
    for depth in range(len(parts)):  # the folders above base, from top down
        folder = top.joinpath(*parts[:depth])
        for name in IGNORE_FILES:
            spec = _read_path(folder / name)
            if spec is not None:
                rules.specs.append(("/".join(parts[:depth]), spec))
    if base_rel and rules.ignored(base_rel, is_dir=True):
        # Asked for by name: searched, and only the rules inside it apply.
        return IgnoreRules(top=base), ""
    return rules, base_rel


def _repository_root(base: Path) -> Path | None:
    for folder in (base, *base.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return None


def _read_path(path: Path) -> GitIgnoreSpec | None:
    try:
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return _read_spec(path.name, directory)
    finally:
        os.close(directory)


def _read_spec(name: str, directory_fd: int) -> GitIgnoreSpec | None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=directory_fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat_module.S_ISREG(info.st_mode) or info.st_size > MAX_IGNORE_BYTES:
            return None
        data = os.read(fd, MAX_IGNORE_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    from pathspec import GitIgnoreSpec  # imported on first use: `import subagents` stays light

    lines = data.decode("utf-8", errors="replace").splitlines()
    return GitIgnoreSpec.from_lines(lines) if any(_meaningful(line) for line in lines) else None


def _meaningful(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")
