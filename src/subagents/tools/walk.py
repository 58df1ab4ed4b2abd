"""Which files Grep and Glob look at, and matching glob patterns against them.

Both tools, and both engines (``rg`` when installed, this module's Python walk otherwise), see
the same files: regular files only (symlinks are not followed, FIFOs, sockets and devices are
skipped); version-control folders (``.git``, ``.svn``, ``.hg``, ``.bzr``, ``.jj``, ``.sl``)
never; hidden files and folders only when the request names a hidden component
(``wants_hidden``); nothing an ignore file excludes (``ignore.py``: ``.gitignore``, ``.ignore``,
``.git/info/exclude``), except a folder named explicitly as the search path. Files the read
rules deny are dropped (``readable``) before the Python engine reads them and before any
result of ``rg`` is shown.

Patterns are translated to regular expressions here rather than left to ``fnmatch``, because
``fnmatch`` lets ``*`` cross ``/`` and knows neither ``**`` nor ``{a,b}``; they match the path
relative to the search folder, the same for both engines.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from subagents.tools.base import ToolContext
from subagents.tools.ignore import IgnoreRules, rules_for
from subagents.tools.paths import allowed_roots, is_inside
from subagents.tools.ripgrep import VCS_DIRS, common_args, ripgrep_binary, run_rg, split_null

MAX_DEPTH = 128
"""Folders deeper than this below the search folder are not walked (one descriptor per level)."""
_MAGIC = re.compile(r"[*?\[{]")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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


def name_filter(glob: str | None) -> Callable[[str], bool]:
    """Grep's ``glob``: without ``/`` it matches the file name at any depth; with ``/``, the
    path relative to the search folder."""
    if not glob:
        return lambda rel: True
    regex = compile_glob(glob)
    if "/" in glob:
        return lambda rel: regex.fullmatch(rel) is not None
    return lambda rel: regex.fullmatch(rel.rpartition("/")[2]) is not None


def wants_hidden(*patterns: str | None) -> bool:
    """Whether a pattern names a hidden component (``.github/**``, ``**/.env``): then hidden
    files and folders are searched too. Otherwise they are skipped, as ``rg`` skips them."""
    return any(
        part.startswith(".") and part not in (".", "..")
        for pattern in patterns
        if pattern
        for part in pattern.split("/")
    )


def root_of(path: Path, roots: tuple[Path, ...]) -> Path:
    """The innermost allowed root holding the (resolved, confined) ``path``."""
    inside = [root for root in roots if is_inside(path, root)]
    return max(inside, key=lambda root: len(root.parts)) if inside else path


async def list_files(
    base: Path, ctx: ToolContext, *, hidden: bool, use_rg: bool = True
) -> list[tuple[Path, str]]:
    """Every file Grep and Glob may look at below ``base``: ``(path, relative posix path)``.

    ``rg --files`` when ripgrep is installed and ``use_rg``, else the Python walk
    (``iter_files``); both follow the same rules (module docstring). Denied files are not
    filtered here: see ``readable``."""
    binary = ripgrep_binary() if use_rg else None
    if binary is not None:
        result = await run_rg(binary, ["--files", *common_args(hidden=hidden), "--", str(base)])
        if result.code in (0, 1) or result.stdout:  # 2 with output: some folder was unreadable
            return [(Path(name), relative_to(name, base)) for name in split_null(result.stdout)]
    root = root_of(base, allowed_roots(ctx))
    stop = lambda: ctx.abort.aborted  # noqa: E731
    return await asyncio.to_thread(lambda: list(iter_files(base, root, hidden=hidden, stop=stop)))


def relative_to(name: str, base: Path) -> str:
    """``name`` (a path ``rg`` printed below ``base``) relative to ``base``, posix style."""
    prefix = str(base).rstrip("/") + "/"
    return name[len(prefix) :] if name.startswith(prefix) else Path(name).name


def readable(files: Iterable[Path], ctx: ToolContext) -> list[Path]:
    """``files`` without those the read rules deny (or would ask about): nothing of a denied
    file is read, listed or counted."""
    guard = ctx.read_guard
    if guard is None:
        return list(files)
    return [path for path in files if guard.read_denial(path, asks=True) is None]


def iter_files(
    base: Path, root: Path, *, hidden: bool, stop: Callable[[], bool]
) -> Iterator[tuple[Path, str]]:
    """The Python walk: every regular file below ``base`` as ``(path, relative posix path)``.

    Folders are opened one below the other (``O_NOFOLLOW``), so a folder swapped for a symlink
    during the walk is not followed; ``stop`` is polled once per folder so an aborted agent ends
    a long walk promptly; entries come in name order."""
    rules, base_rel = rules_for(base, root)
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    walk = _Walk(rules=rules, hidden=hidden, stop=stop)
    try:
        yield from walk.folder(fd, base, "", base_rel, 0)
    finally:
        os.close(fd)


@dataclass(kw_only=True, slots=True)
class _Walk:
    """One directory walk's settings: ignore rules, hidden files, when to stop."""

    rules: IgnoreRules
    hidden: bool
    stop: Callable[[], bool]

    def folder(
        self, fd: int, path: Path, rel: str, top_rel: str, depth: int
    ) -> Iterator[tuple[Path, str]]:
        """``rel``: relative to the search folder; ``top_rel``: relative to the rules' top."""
        added = self.rules.add_folder(top_rel, fd)
        try:
            with os.scandir(fd) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
            for entry in entries:
                yield from self.entry(entry, fd, path, rel, top_rel, depth)
        except OSError:
            return  # an unreadable folder is skipped, as rg skips it
        finally:
            self.rules.drop(added)

    def entry(
        self, entry: os.DirEntry[str], fd: int, path: Path, rel: str, top_rel: str, depth: int
    ) -> Iterator[tuple[Path, str]]:
        name = entry.name
        if name.startswith(".") and not self.hidden:
            return
        child_rel = f"{rel}/{name}" if rel else name
        child_top = f"{top_rel}/{name}" if top_rel else name
        if entry.is_dir(follow_symlinks=False):
            if name in VCS_DIRS or depth >= MAX_DEPTH or self.stop():
                return
            if self.rules.ignored(child_top, is_dir=True):
                return
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                return
            try:
                yield from self.folder(child, path / name, child_rel, child_top, depth + 1)
            finally:
                os.close(child)
        # Symlinks, FIFOs, sockets and devices are none of these two: skipped.
        elif entry.is_file(follow_symlinks=False) and not self.rules.ignored(
            child_top, is_dir=False
        ):
            yield path / name, child_rel
