"""Path confinement for the file tools (SPEC §13).

Every file tool turns the model's ``file_path``/``path`` into a real path through
``resolve_path``: relative paths start at ``ctx.cwd``, then the path is resolved the way the
operating system will see it (symlinks followed, ``..`` collapsed, and for a path that does not
exist yet, its existing ancestors resolved). Only then is it compared with the allowed roots, so
neither ``../`` nor a symlink planted inside the working directory can reach a file outside it.
The check is on the resolved path, never on the text the model wrote.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

from subagents.tools.base import ToolContext, ToolError

CONFINEMENT_NOTE = "File tools are confined to the working directory and its added directories."


MAX_PATH_BYTES = 4095
MAX_NAME_BYTES = 255


def _valid_path_text(raw: str) -> str:
    # Checked at validation, before any permission rule resolves the path: the OS refuses such
    # a name anyway, and the model learns which field to fix and why.
    if "\x00" in raw:
        raise ValueError("the path contains a NUL byte, which no file name can hold")
    if len(raw) <= MAX_NAME_BYTES and raw.isascii():
        return raw  # one byte a character: no name or path can be too long, none unencodable
    try:
        encoded = os.fsencode(raw)
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"the path holds U+{ord(raw[exc.start]):04X} at character {exc.start}, a lone "
            "surrogate that no file name can hold"
        ) from None
    if len(encoded) > MAX_PATH_BYTES:
        raise ValueError(f"the path is {len(encoded):,} bytes long; at most {MAX_PATH_BYTES}")
    longest = max(map(len, encoded.split(b"/")))
    if longest > MAX_NAME_BYTES:
        raise ValueError(
            f"one name in the path is {longest} bytes long; a file name holds at most "
            f"{MAX_NAME_BYTES}"
        )
    return raw


PathText = Annotated[str, AfterValidator(_valid_path_text)]
"""A path field of a file tool's input (``file_path``, ``path``): a string the file system can
take as a path (no NUL, no unencodable surrogate, names and length within the system's limits)."""


def allowed_roots(ctx: ToolContext) -> tuple[Path, ...]:
    """The resolved roots; an empty ``roots`` means the working directory alone."""
    return roots_of(ctx).resolved


class RootSet:
    """A context's roots resolved once: what every file tool call needs of them.

    Kept per (``ctx.roots``, ``ctx.cwd``) object pair (``roots_of``): a context's roots only
    change by assignment (EnterWorktree), and the memo holds the very objects it was made
    from, so a changed context never sees an older answer. Without it each Read hashed its
    roots (``Path.__hash__`` is Python code) in four caches and made their text again."""

    __slots__ = ("cwd", "cwd_text", "local", "prefixes", "resolved", "roots")

    def __init__(self, roots: tuple[Path, ...], cwd: Path) -> None:
        self.roots, self.cwd = roots, cwd
        self.resolved = _resolved_roots(roots or (cwd,))
        self.cwd_text = str(_resolved_roots((cwd,))[0])
        self.prefixes = _root_prefixes(self.resolved)
        """(text of a root followed by "/", its text), the longest root first."""
        self.local: bool | None = None
        """Whether every root is on a local file system (``confined.on_local_disks``)."""


_ROOT_SETS: dict[tuple[int, int], RootSet] = {}
_MAX_ROOT_SETS = 256


def roots_of(ctx: ToolContext) -> RootSet:
    """The ``RootSet`` of ``ctx``'s current roots and working directory."""
    roots, cwd = ctx.roots, ctx.cwd
    key = (id(roots), id(cwd))
    found = _ROOT_SETS.get(key)
    if found is not None and found.roots is roots and found.cwd is cwd:
        return found
    made = RootSet(roots, cwd)
    if len(_ROOT_SETS) >= _MAX_ROOT_SETS:
        _ROOT_SETS.clear()  # contexts come and go with their agents: start again
    _ROOT_SETS[key] = made  # holds roots and cwd, so their ids are not reused meanwhile
    return made


@functools.lru_cache(maxsize=256)
def _resolved_roots(roots: tuple[Path, ...]) -> tuple[Path, ...]:
    # Resolving a root costs an lstat per component on every call; the roots of a session are
    # fixed (the project, its worktrees, added directories), so each tuple is resolved once.
    return tuple(_resolve(root, str(root)) for root in roots)


def _root_prefixes(roots: tuple[Path, ...]) -> tuple[tuple[str, str], ...]:
    # Longest first, so the first root a path starts with is the one that holds it.
    ordered = sorted(roots, key=lambda root: len(root.parts), reverse=True)
    return tuple((str(root).rstrip("/") + "/", str(root)) for root in ordered)


def plain_path(raw: str, ctx: ToolContext) -> tuple[str, str] | None:
    """``(root, path below it)`` as text for ``raw`` found by text alone, or None: resolve it
    instead.

    When no component of the path is a symbolic link, resolving it only makes it absolute
    (from the resolved ``cwd``) and drops empty and ``.`` parts, which is what this does without
    an ``lstat`` per component. Whether a component *is* a link the caller learns when it opens
    the path one component at a time with ``O_NOFOLLOW`` (``confined.open_tool_path``): a link
    fails that open, and the caller resolves the path (``resolve_path``) and opens it again. A
    ``..`` (a link before it would redirect it) and ``~`` always take the resolving way."""
    if not raw or raw[0] == "~" or "\x00" in raw:
        return None
    found = roots_of(ctx)
    if raw[0] != "/":
        raw = f"{found.cwd_text}/{raw}"
    if "//" in raw or "/." in raw or raw[-1] == "/":
        names = [name for name in raw.split("/") if name and name != "."]
        if ".." in names or raw.startswith("//"):
            return None  # "//" is a name of its own on POSIX; leave it to the resolver
        text = "/" + "/".join(names)
    else:  # no empty, "." or ".." name (nor a hidden one): the text is already in that form
        text = raw
    for prefix, root in found.prefixes:
        if text.startswith(prefix):
            return root, text[len(prefix) :]
    return None


def resolve_path(raw: str, ctx: ToolContext) -> Path:
    """The absolute, fully resolved path for ``raw``; ``ToolError`` if it leaves every root."""
    if not raw.strip():
        raise ToolError("The path is empty; give a file path inside the working directory.")
    if "\x00" in raw:
        raise ToolError(f"The path {raw!r} contains a NUL byte, which no file name can hold.")
    candidate = Path(raw).expanduser()
    if not candidate.is_absolute():
        candidate = ctx.cwd / candidate
    resolved = _resolve(candidate, raw)
    roots = allowed_roots(ctx)
    if any(is_inside(resolved, root) for root in roots):
        return resolved
    raise ToolError(
        f"Path '{raw}' resolves to '{resolved}', outside the working directory "
        f"'{ctx.cwd}' (allowed: {', '.join(str(r) for r in roots)}). {CONFINEMENT_NOTE}"
    )


def is_inside(path: Path, root: Path) -> bool:
    """True when the (already resolved) ``path`` is ``root`` or lies below it."""
    return path == root or path.is_relative_to(root)


def display_path(path: Path, ctx: ToolContext) -> str:
    """``path`` relative to the working directory when it lies below it, else absolute.

    Results name files the short way the model would write them; anything outside ``cwd``
    (an added directory) keeps its absolute path so it stays unambiguous.
    """
    cwd = _resolved_roots((ctx.cwd,))[0]
    if path != cwd and path.is_relative_to(cwd):
        return path.relative_to(cwd).as_posix()
    return str(path)


def _resolve(path: Path, raw: str) -> Path:
    # strict=False resolves the existing prefix (following symlinks, dangling ones included)
    # and appends the rest, which is exactly what a later open()/mkdir() would reach.
    try:
        return path.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # symlink loops: RuntimeError before 3.13
        raise ToolError(f"Cannot resolve path '{raw}': {exc}") from exc


def refuse_denied_read(path: Path | str, ctx: ToolContext) -> None:
    """``ToolError`` when a deny rule forbids reading the resolved ``path`` (Read, Edit).

    The call's own check already matched the rules against this path; this repeats it on the
    path the tool is about to open, so no spelling of the path (a symlink, ``sub/..``) reads
    around a rule."""
    guard = ctx.read_guard
    if guard is not None and (denial := guard.read_denial(path, asks=False)) is not None:
        raise ToolError(denial)
