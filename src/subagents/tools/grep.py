"""The Grep tool: search file contents with a regular expression, with ``rg`` or in Python.

With ``rg`` installed (``tools/ripgrep.py``) one ``rg`` run searches the folder; its results are
then filtered by ``glob`` and the read rules. Without it, or for a single file, or for a pattern
only Python's syntax accepts (look-around, back-references), the Python engine searches: the
pattern is compiled once, each candidate file is read once as bytes (NUL in the first 8 KiB
means binary, skipped) and decoded with ``errors="replace"``, a whole-text search rejects most
files before any per-line work, and ``files_with_matches`` stops at a file's first matching
line. Matching is per line in both (``^``/``$`` anchor at line boundaries, before a CRLF too).
Which files are searched (ignore files, hidden and version-control folders, read rules) is
``walk.py``'s, the same for both engines and for Glob.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.tools import descriptions
from subagents.tools.base import (
    CallInfo,
    LazyInput,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
)
from subagents.tools.confined import open_confined
from subagents.tools.glob import newest_first, search_directory
from subagents.tools.paths import allowed_roots, display_path, resolve_path

if TYPE_CHECKING:
    from subagents.tools.inputs.grep import GrepInput, OutputMode

MAX_FILE_BYTES = 50 * 1024 * 1024
"""Files larger than this are not searched (``rg --max-filesize`` and the Python engine)."""
MAX_LINE_CHARS = 500
BINARY_SNIFF_BYTES = 8192
PATTERN_EXCERPT_CHARS = 80


DESCRIPTION = descriptions.GREP.format(
    max_file_mib=MAX_FILE_BYTES // (1024 * 1024), max_line_chars=MAX_LINE_CHARS
)


@dataclass(kw_only=True, slots=True)
class FileMatches:
    """The matching lines of one file (none or only the first in files_with_matches mode)."""

    path: Path
    lines: list[tuple[int, str]] = field(default_factory=list)
    count: int = 0
    """Matching lines in the file (count mode; the other modes do not need it)."""


class GrepTool(Tool["GrepInput"]):
    """Regex search over file contents; read-only and safe to run alongside other reads."""

    name = "Grep"
    description = DESCRIPTION
    input_model = LazyInput["GrepInput"]("subagents.tools.inputs.grep", "GrepInput")

    def is_read_only(self, args: GrepInput) -> bool:
        return True

    def is_concurrency_safe(self, args: GrepInput) -> bool:
        return True

    async def call(self, args: GrepInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        ignore_case = bool(args.case_insensitive)
        # The search's parts are imported at the first call: a start-up that only offers the
        # tool does not load the walk, rg's runner, ignore rules.
        from subagents.tools.ripgrep import ripgrep_binary

        target, is_file = search_target(args.path, ctx)
        binary = ripgrep_binary()
        if not is_file and binary is not None and _fits_an_argument(args.pattern):
            found = await rg_search(binary, target, args, ctx)
            if found is not None:
                return render(found, args, ctx)
        # The Python engine: no rg, a single file, or a pattern only Python's syntax accepts.
        regex = compile_pattern(args.pattern, ignore_case=ignore_case)
        files = [target] if is_file else await candidate_files(target, args.glob, ctx)
        results = await asyncio.to_thread(search, regex, files, args, ctx)
        return render(results, args, ctx)


def _fits_an_argument(pattern: str) -> bool:
    """Whether ``rg`` can be given the pattern: an argument holds no NUL and no lone surrogate
    (Python's engine takes such a pattern)."""
    if "\x00" in pattern:
        return False
    try:
        os.fsencode(pattern)
    except UnicodeEncodeError:
        return False
    return True


def compile_pattern(pattern: str, *, ignore_case: bool) -> re.Pattern[str]:
    """The compiled pattern, or a ``ToolError`` the model can act on."""
    flags = re.MULTILINE | (re.IGNORECASE if ignore_case else 0)
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise ToolError(invalid_pattern_message(pattern, exc)) from None
    except (OverflowError, RecursionError) as exc:  # absurd repeat counts or nesting
        raise ToolError(
            f"Invalid regular expression in Grep `pattern`: {exc} "
            f"(pattern: '{pattern_excerpt(pattern, 0)}'). Simplify the pattern and try again."
        ) from None


def invalid_pattern_message(pattern: str, exc: re.error) -> str:
    """One readable paragraph: the problem, its position and a short excerpt of the pattern."""
    where = f" at position {exc.pos}" if exc.pos is not None else ""
    shown = (
        "pattern"
        if len(pattern) <= PATTERN_EXCERPT_CHARS
        else (f"pattern of {len(pattern)} characters, shown around the error")
    )
    return (
        f"Invalid regular expression in Grep `pattern`: {exc.msg}{where} "
        f"({shown}: '{pattern_excerpt(pattern, exc.pos or 0)}'). Grep uses Python regular "
        "expression syntax; escape special characters such as ( ) [ ] { } . * + ? | with a "
        "backslash to match them literally, then try again."
    )


def pattern_excerpt(pattern: str, position: int) -> str:
    """At most ``PATTERN_EXCERPT_CHARS`` of ``pattern`` around ``position``, on one line."""
    if len(pattern) > PATTERN_EXCERPT_CHARS:
        half = PATTERN_EXCERPT_CHARS // 2
        start = max(0, min(position - half, len(pattern) - PATTERN_EXCERPT_CHARS))
        end = start + PATTERN_EXCERPT_CHARS
        text = ("…" if start else "") + pattern[start:end] + ("…" if end < len(pattern) else "")
    else:
        text = pattern
    return text.replace("\r", "\\r").replace("\n", "\\n")


def search_target(raw: str | None, ctx: ToolContext) -> tuple[Path, bool]:
    """A confined file or directory to search, and whether it is a (regular) file."""
    if raw:
        path = resolve_path(raw, ctx)
        if path.is_file():
            return path, True
    return search_directory(raw, ctx), False


def search(
    regex: re.Pattern[str], files: Iterable[Path], args: GrepInput, ctx: ToolContext
) -> list[FileMatches]:
    """Files with at least one matching line, in the order given."""
    mode, limit = args.output_mode, args.head_limit or 0
    roots = allowed_roots(ctx)
    results: list[FileMatches] = []
    total_lines = 0
    for path in files:
        if ctx.abort.aborted:
            break
        matches = match_file(path, regex, roots, first_only=mode == "files_with_matches")
        if matches is None:
            continue
        results.append(matches)
        total_lines += len(matches.lines)
        # Output in these modes is cut at head_limit: stop once it is known to be exceeded.
        if limit and mode == "count" and len(results) > limit:
            break
        if limit and mode == "content" and total_lines > limit:
            break
    return results


async def candidate_files(target: Path, glob: str | None, ctx: ToolContext) -> list[Path]:
    """The files below ``target`` that ``glob`` accepts, in path order, without those the read
    rules deny (before anything is read)."""
    from subagents.tools.walk import list_files, name_filter, readable, wants_hidden

    accept = name_filter(glob)
    files = await list_files(target, ctx, hidden=wants_hidden(glob))
    return readable(sorted(path for path, rel in files if accept(rel)), ctx)


async def rg_search(
    binary: str, target: Path, args: GrepInput, ctx: ToolContext
) -> list[FileMatches] | None:
    """The search done by ``rg``; None when it refuses the pattern (Python's syntax is then
    tried) or fails outright. ``glob`` and the read rules filter what it found."""
    from subagents.tools.ripgrep import run_rg
    from subagents.tools.walk import name_filter, readable, relative_to

    result = await run_rg(binary, rg_arguments(target, args))
    if result.code == 2 and not result.stdout:
        return None  # a pattern rg cannot parse, or no search at all: the Python engine decides
    found = parse_rg_output(result.stdout, args.output_mode)
    accept = name_filter(args.glob)
    keep = set(readable((m.path for m in found if accept(relative_to(str(m.path), target))), ctx))
    return sorted((m for m in found if m.path in keep), key=lambda m: str(m.path))


def rg_arguments(target: Path, args: GrepInput) -> list[str]:
    """``rg`` arguments for one Grep call (the walk options are ``walk.py``'s)."""
    from subagents.tools.ripgrep import common_args
    from subagents.tools.walk import wants_hidden

    mode = {
        "files_with_matches": ["--files-with-matches"],
        "count": ["--count", "--with-filename"],
        "content": ["--line-number", "--with-filename", "--no-heading"],
    }[args.output_mode]
    return [
        *common_args(hidden=wants_hidden(args.glob)),
        *mode,
        "--crlf",
        f"--max-filesize={MAX_FILE_BYTES}",
        *(["--ignore-case"] if args.case_insensitive else []),
        f"--regexp={args.pattern}",
        "--",
        str(target),
    ]


def parse_rg_output(data: bytes, mode: OutputMode) -> list[FileMatches]:
    """``--null`` output: ``path\\0`` (files), ``path\\0N\\n`` (count) or
    ``path\\0N:text\\n`` (content); a path may hold any byte but NUL."""
    from subagents.tools.ripgrep import split_null

    if mode == "files_with_matches":
        return [FileMatches(path=Path(name)) for name in split_null(data)]
    by_path: dict[bytes, FileMatches] = {}
    position = 0
    while (zero := data.find(b"\0", position)) >= 0:
        end = data.find(b"\n", zero)
        end = len(data) if end < 0 else end
        name, rest = data[position:zero], data[zero + 1 : end]
        position = end + 1
        found = by_path.get(name)
        if found is None:
            found = by_path[name] = FileMatches(path=Path(os.fsdecode(name)))
        if mode == "count":
            found.count = int(rest or b"0")
            continue
        number, _, text = rest.partition(b":")
        line = text.decode("utf-8", errors="replace").removesuffix("\r")
        found.lines.append((int(number or b"0"), line))
        found.count += 1
    return list(by_path.values())


def match_file(
    path: Path, regex: re.Pattern[str], roots: tuple[Path, ...], *, first_only: bool
) -> FileMatches | None:
    """The matching lines of a text file; ``None`` when none match or it cannot be searched."""
    text = read_text(path, roots)
    if text is None:
        return None
    # \A and \Z mean "line start/end" per line but "file start/end" on the whole text.
    if "\\A" not in regex.pattern and "\\Z" not in regex.pattern and not regex.search(text):
        return None
    found = FileMatches(path=path)
    for number, line in enumerate(text.split("\n"), 1):
        if regex.search(line):
            found.lines.append((number, line))
            if first_only:
                break
    found.count = len(found.lines)
    return found if found.lines else None


def read_text(path: Path, roots: tuple[Path, ...]) -> str | None:
    """The file as text with ``\\n`` line ends; ``None`` for binary, huge, special or unreadable
    files. Opened like every file tool opens (``confined.open_confined``: no symlink followed,
    regular files only)."""
    try:
        opened = open_confined(path, roots, os.O_RDONLY)
    except (OSError, ToolError):
        return None
    with os.fdopen(opened.fd, "rb") as handle:
        try:
            if os.fstat(handle.fileno()).st_size > MAX_FILE_BYTES:
                return None
            raw = handle.read(MAX_FILE_BYTES + 1)
        except OSError:
            return None
    if len(raw) > MAX_FILE_BYTES or raw.find(0, 0, BINARY_SNIFF_BYTES) >= 0:
        return None
    text = raw.decode("utf-8", errors="replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.removesuffix("\n")


def render(results: list[FileMatches], args: GrepInput, ctx: ToolContext) -> ToolOutput:
    """Format results for the requested ``output_mode``, applying ``head_limit``."""
    if args.output_mode == "files_with_matches":
        return _render_files(results, args.head_limit, ctx)
    if args.output_mode == "count":
        return _render_counts(results, args.head_limit, ctx)
    return _render_content(results, args, ctx)


def _render_files(results: list[FileMatches], limit: int | None, ctx: ToolContext) -> ToolOutput:
    if not results:
        return ToolOutput(content="No files found", metadata={"num_files": 0})
    paths = newest_first(r.path for r in results)
    shown = paths[:limit] if limit else paths
    noun = "file" if len(paths) == 1 else "files"
    lines = [f"Found {len(paths)} {noun}", *(display_path(p, ctx) for p in shown)]
    text = "\n".join(lines) + _limit_note(len(shown), len(paths), limit, "files")
    return ToolOutput(content=text, metadata={"num_files": len(paths)})


def _render_counts(results: list[FileMatches], limit: int | None, ctx: ToolContext) -> ToolOutput:
    if not results:
        return ToolOutput(content="No matches found", metadata={"num_files": 0, "num_matches": 0})
    shown = results[:limit] if limit else results
    lines = [f"{display_path(r.path, ctx)}:{r.count}" for r in shown]
    total = sum(r.count for r in shown)
    noun = "file" if len(shown) == 1 else "files"
    text = "\n".join(lines) + f"\n\nFound {total} total occurrences across {len(shown)} {noun}."
    text += _limit_note(len(shown), len(results), limit, "files")
    return ToolOutput(content=text, metadata={"num_files": len(shown), "num_matches": total})


def _render_content(results: list[FileMatches], args: GrepInput, ctx: ToolContext) -> ToolOutput:
    numbered = args.line_numbers is not False
    lines: list[str] = []
    for result in results:
        name = display_path(result.path, ctx)
        for number, line in result.lines:
            text = _cut(line)
            lines.append(f"{name}:{number}:{text}" if numbered else f"{name}:{text}")
    if not lines:
        return ToolOutput(content="No matches found", metadata={"num_matches": 0})
    limit = args.head_limit
    shown = lines[:limit] if limit else lines
    text = "\n".join(shown) + _limit_note(len(shown), len(lines), limit, "lines")
    return ToolOutput(content=text, metadata={"num_files": len(results), "num_matches": len(shown)})


def _limit_note(shown: int, total: int, limit: int | None, unit: str) -> str:
    if not limit or total <= shown:
        return ""
    return (
        f"\n\n(Output limited by head_limit={limit}: showing the first {shown} {unit}; more "
        "results exist. Raise head_limit or narrow the search to see them.)"
    )


def _cut(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return line[:MAX_LINE_CHARS] + f"… [{len(line) - MAX_LINE_CHARS} more characters]"
