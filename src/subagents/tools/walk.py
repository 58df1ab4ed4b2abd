"""Walking a directory tree and matching glob patterns, shared by Glob and Grep.

Both tools must see the same files the same way: ``.git`` contents are skipped, symlinked
directories are not descended (no loops, no escape), and a symlinked *file* is listed only when
its target lies inside an allowed root, so Grep can never read through a link what Read would
refuse. Patterns are translated to regular expressions here rather than left to ``fnmatch``,
because ``fnmatch`` lets ``*`` cross ``/`` and knows neither ``**`` nor ``{a,b}``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from subagents.tools.paths import is_inside

SKIPPED_DIRS = frozenset({".git"})
_MAGIC = re.compile(r"[*?\[{]")


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex that fully matches the ``/``-separated relative paths ``pattern`` names.

    ``*`` and ``?`` stay inside one path component, ``**/`` spans zero or more directories,
    ``[...]`` is a character class (``!`` or ``^`` negates) and ``{a,b}`` is an alternation.
    Unbalanced braces are taken literally.
    """
    braces = _braces_balanced(pattern)
    out: list[str] = []
    i, depth = 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            i = _star(pattern, i, out)
            continue
        if c == "[":
            i = _char_class(pattern, i, out)
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 1
        elif braces and c == "{":
            out.append("(?:")
            depth += 1
        elif braces and c == "}" and depth:
            out.append(")")
            depth -= 1
        elif braces and c == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("(?s:" + "".join(out) + ")")


def _star(pattern: str, i: int, out: list[str]) -> int:
    """Translate the ``*`` or ``**`` at ``i``; returns the index after it."""
    if not pattern.startswith("**", i):
        out.append("[^/]*")
        return i + 1
    whole_component = i == 0 or pattern[i - 1] == "/"
    after = i + 2
    if whole_component and pattern.startswith("/", after):
        out.append("(?:[^/]*/)*")  # "**/" : zero or more directories
        return after + 1
    out.append(".*")
    return after


def _char_class(pattern: str, i: int, out: list[str]) -> int:
    """Translate the ``[...]`` at ``i`` (a lone ``[`` is literal); returns the index after it."""
    j = i + 1
    if j < len(pattern) and pattern[j] in "!^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    end = pattern.find("]", j)
    if end < 0:
        out.append(re.escape("["))
        return i + 1
    body = pattern[i + 1 : end].replace("\\", "\\\\").replace("[", "\\[")
    if body[:1] in ("!", "^"):
        body = "^" + body[1:]
    out.append(f"[{body}]")
    return end + 1


def _braces_balanced(pattern: str) -> bool:
    depth = 0
    for c in pattern:
        depth += (c == "{") - (c == "}")
        if depth < 0:
            return False
    return depth == 0 and "{" in pattern


def split_literal_prefix(pattern: str) -> tuple[str, str]:
    """Split ``pattern`` into leading directories without wildcards and the rest.

    ``"src/**/*.py"`` gives ``("src", "**/*.py")``: the walk starts in ``src`` instead of
    visiting the whole tree. The last component always stays in the rest.
    """
    parts = pattern.split("/")
    literal: list[str] = []
    for part in parts[:-1]:
        if _MAGIC.search(part):
            break
        literal.append(part)
    rest = "/".join(parts[len(literal) :])
    prefix = "/".join(literal)
    if pattern.startswith("/") and not prefix:
        prefix = "/"
    return prefix, rest


def iter_files(
    base: Path, roots: tuple[Path, ...], should_stop: Callable[[], bool]
) -> Iterator[tuple[Path, str]]:
    """Every file below ``base`` as ``(path, path relative to base in posix form)``.

    Directories are visited in sorted order so results are stable; ``should_stop`` is polled
    once per directory so an aborted agent stops a long walk promptly.
    """
    for dirpath, dirnames, filenames in os.walk(base):
        if should_stop():
            return
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
        directory = Path(dirpath)
        rel_dir = directory.relative_to(base).as_posix()
        for name in sorted(filenames):
            path = directory / name
            if path.is_symlink() and not _link_target_allowed(path, roots):
                continue
            yield path, name if rel_dir == "." else f"{rel_dir}/{name}"


def _link_target_allowed(path: Path, roots: tuple[Path, ...]) -> bool:
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return False  # dangling or looping: nothing to read
    return target.is_file() and any(is_inside(target, root) for root in roots)
