"""Gitignore-style path patterns for file rules (``Read(./src/**)``, ``Edit(//etc/**)``).

Anchors, as in Claude Code:

- ``//abs/path``: an absolute path;
- ``~/path``: below the home directory;
- ``/path``: relative to the settings file's project, i.e. the project root;
- ``./path`` or ``dir/path``: relative to the project root;
- ``name`` (no slash at all): a file or directory of that name at any depth below the root,
  as a gitignore line without a slash does.

``*`` and ``?`` stay within one path segment, ``**`` spans any number of segments, ``[...]``
is a character class. A pattern that matches a directory also covers everything below it, so
``Read(./secrets)`` protects ``secrets/key.pem`` too. Both the pattern's anchor and the path
are resolved (symlinks followed) before matching, so a symlink cannot dodge a deny rule.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Protocol


class _Scope(Protocol):
    @property
    def project_root(self) -> Path: ...

    @property
    def home(self) -> Path: ...


def path_matches(pattern: str, path: Path, scope: _Scope, *, directory: bool = False) -> bool:
    """Whether the resolved absolute ``path`` (or a directory above it) matches ``pattern``.

    ``directory``: ``path`` is a directory to search, so a pattern covering everything inside
    it (``secrets/**`` for ``secrets``) matches too.
    """
    absolute = anchored_pattern(pattern, scope)
    regex = _compile(absolute)
    if directory and regex.fullmatch(path.as_posix().rstrip("/") + "/"):
        return True
    candidate = path
    while True:
        if regex.fullmatch(candidate.as_posix()):
            return True
        if candidate.parent == candidate:
            return False
        candidate = candidate.parent


def anchored_pattern(pattern: str, scope: _Scope) -> str:
    """The pattern as an absolute glob (its literal anchor resolved, the glob part kept)."""
    if pattern.startswith("//"):
        base, rest = Path("/"), pattern[2:]
    elif pattern == "~" or pattern.startswith("~/"):
        base, rest = scope.home, pattern[2:]
    elif pattern.startswith("/"):
        base, rest = scope.project_root, pattern[1:]
    elif pattern.startswith("./"):
        base, rest = scope.project_root, pattern[2:]
    elif "/" not in pattern.rstrip("/"):
        base, rest = scope.project_root, "**/" + pattern
    else:
        base, rest = scope.project_root, pattern
    literal, glob = _split_literal(rest.rstrip("/"))
    root = (base / literal).resolve(strict=False).as_posix().rstrip("/")
    return f"{root}/{glob}" if glob else root or "/"


def _split_literal(rest: str) -> tuple[str, str]:
    """Split off the leading segments without wildcards; only those can be resolved on disk."""
    segments = [s for s in rest.split("/") if s not in ("", ".")]
    for index, segment in enumerate(segments):
        if any(ch in segment for ch in "*?["):
            return "/".join(segments[:index]), "/".join(segments[index:])
    return "/".join(segments), ""


@lru_cache(maxsize=512)
def _compile(glob: str) -> re.Pattern[str]:
    return re.compile(glob_to_regex(glob), re.DOTALL)


def glob_to_regex(glob: str) -> str:
    """Translate a gitignore-style glob into a regular expression for ``fullmatch``."""
    out: list[str] = []
    index = 0
    while index < len(glob):
        if glob.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
        elif glob.startswith("**", index):
            out.append(".*")
            index += 2
        elif glob[index] == "*":
            out.append("[^/]*")
            index += 1
        elif glob[index] == "?":
            out.append("[^/]")
            index += 1
        elif glob[index] == "[" and (end := glob.find("]", index + 2)) > 0:
            body = glob[index + 1 : end]
            negate = body.startswith(("!", "^"))
            body = re.sub(r"([\\\]])", r"\\\1", body[1:] if negate else body)
            out.append(f"[{'^' if negate else ''}{body}]")
            index = end + 1
        else:
            out.append(re.escape(glob[index]))
            index += 1
    return "".join(out)
