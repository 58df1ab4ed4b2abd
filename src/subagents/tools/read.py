"""The Read tool: a text file, or a range of its lines, numbered like ``cat -n``.

Limits keep one read from flooding the context: a file over ``MAX_FILE_BYTES`` needs an explicit
``offset``/``limit``, at most ``DEFAULT_LINE_LIMIT`` lines come back per call, each line is cut at
``MAX_LINE_CHARS``, and the whole answer stops at ``MAX_OUTPUT_CHARS`` with a note saying where
to continue. The mtime seen is recorded in ``ctx.read_files`` so later edits can tell whether the
file changed since the agent looked at it.
"""

from __future__ import annotations

import asyncio
import codecs
import os
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import BinaryIO

from pydantic import Field

from subagents.tools import descriptions
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolError, ToolInput, ToolOutput
from subagents.tools.confined import open_confined
from subagents.tools.paths import PathText, allowed_roots, refuse_denied_read, resolve_path

DEFAULT_LINE_LIMIT = 2000
MAX_LINE_CHARS = 2000
MAX_LINE_BYTES = 64 * 1024
"""At most this much of one line is held in memory; the rest is only counted."""
MAX_FILE_BYTES = 256 * 1024
MAX_OUTPUT_CHARS = 100_000
BINARY_SNIFF_BYTES = 8192
NEWLINE = "\n"

DESCRIPTION = descriptions.READ.format(
    line_limit=DEFAULT_LINE_LIMIT,
    max_file_kib=MAX_FILE_BYTES // 1024,
    max_line_chars=MAX_LINE_CHARS,
)


class ReadInput(ToolInput):
    file_path: PathText = Field(description="The path of the file to read.")
    offset: int | None = Field(
        default=None,
        ge=0,
        description="The 1-based line number to start reading from (0 also means the first line).",
    )
    limit: int | None = Field(default=None, ge=1, description="The number of lines to read.")


@dataclass(kw_only=True, slots=True)
class _Excerpt:
    """Numbered lines taken from a file, and whether (and where) more would follow."""

    text: str
    first: int
    last: int
    more: bool


class ReadTool(Tool[ReadInput]):
    """Read a text file as numbered lines; confined to the allowed roots."""

    name = "Read"
    description = DESCRIPTION
    input_model = ReadInput
    # The tool caps its own output with a continuation hint; the generic cut must not hit first.
    max_result_chars = MAX_OUTPUT_CHARS + 1000

    def is_read_only(self, args: ReadInput) -> bool:
        return True

    def is_concurrency_safe(self, args: ReadInput) -> bool:
        return True

    async def call(self, args: ReadInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        path = resolve_path(args.file_path, ctx)
        refuse_denied_read(path, ctx)
        roots = allowed_roots(ctx)
        content, mtime_ns = await asyncio.to_thread(read_file, path, args.offset, args.limit, roots)
        ctx.read_files[str(path)] = mtime_ns
        return ToolOutput(content=content)


def read_file(
    path: Path, offset: int | None, limit: int | None, roots: tuple[Path, ...]
) -> tuple[str, int]:
    """The tool's answer for ``path`` and the mtime (ns) of the file that was read."""
    with _open(path, roots) as handle:
        stat = _check_readable(handle, path, offset, limit)
        if stat.st_size == 0:
            return f"(The file {path} exists but is empty.)", stat.st_mtime_ns
        start = max(offset or 1, 1)
        count = limit or DEFAULT_LINE_LIMIT
        excerpt = _numbered_lines(handle, start, count)
        if excerpt.last < excerpt.first:
            handle.seek(0)
            total = _count_lines(handle)
            notice = (
                f"(The file {path} has {total} lines; offset {start} is past its end. "
                "Use a smaller offset.)"
            )
            return notice, stat.st_mtime_ns
    text = excerpt.text
    if excerpt.more:
        text += (
            f"\n\n(Showing lines {excerpt.first}-{excerpt.last}. More lines follow: "
            f"continue with offset={excerpt.last + 1}.)"
        )
    return text, stat.st_mtime_ns


def _open(path: Path, roots: tuple[Path, ...]) -> BinaryIO:
    try:
        opened = open_confined(path, roots, os.O_RDONLY)
    except FileNotFoundError:
        raise ToolError(f"File does not exist: {path}") from None
    except IsADirectoryError:
        raise ToolError(
            f"{path} is a directory, not a file. Use Glob or Bash `ls` to list its contents."
        ) from None
    except OSError as exc:
        raise ToolError(f"Cannot read {path}: {exc.strerror or exc}") from None
    return os.fdopen(opened.fd, "rb")


def _check_readable(
    handle: BinaryIO, path: Path, offset: int | None, limit: int | None
) -> os.stat_result:
    stat = os.fstat(handle.fileno())
    if stat.st_size > MAX_FILE_BYTES and offset is None and limit is None:
        raise ToolError(
            f"File {path} is {stat.st_size:,} bytes, more than the {MAX_FILE_BYTES // 1024} KiB "
            "that can be read at once. Read it in parts with offset and limit (for example "
            "offset=1, limit=500), or use Grep to find the lines you need."
        )
    if b"\x00" in handle.read(BINARY_SNIFF_BYTES):
        raise ToolError(
            f"{path} looks like a binary file (it contains NUL bytes); Read only shows text files."
        )
    handle.seek(0)
    return stat


def _numbered_lines(handle: BinaryIO, start: int, count: int) -> _Excerpt:
    """Lines ``start``..``start+count-1`` numbered ``cat -n`` style, cut at the output cap."""
    parts: list[str] = []
    size = 0
    last = start - 1
    lines = islice(bounded_lines(handle), start - 1, None)
    for number, line in enumerate(lines, start):
        if number >= start + count:
            return _Excerpt(text="\n".join(parts), first=start, last=last, more=True)
        numbered = f"{number:>6}\t{_cut(line)}"
        if parts and size + len(numbered) > MAX_OUTPUT_CHARS:
            return _Excerpt(text="\n".join(parts), first=start, last=last, more=True)
        parts.append(numbered)
        size += len(numbered) + 1
        last = number
    return _Excerpt(text="\n".join(parts), first=start, last=last, more=False)


def bounded_lines(handle: BinaryIO) -> Iterator[tuple[str, int]]:
    """Each line as (its first ``MAX_LINE_BYTES`` decoded, characters left out of it).

    A line is never held whole: a file of one endless line (a sparse or generated file) costs
    ``MAX_LINE_BYTES`` of memory, not its size. Line ends (``\\n``, ``\\r\\n``) are dropped."""
    while True:
        raw = handle.readline(MAX_LINE_BYTES)
        if not raw:
            return
        omitted = 0
        if not raw.endswith(b"\n"):
            omitted = _skip_rest_of_line(handle)
        text = raw.decode("utf-8", errors="replace").removesuffix("\n").removesuffix("\r")
        yield text, omitted


def _skip_rest_of_line(handle: BinaryIO) -> int:
    """Read past the rest of an over-long line; returns how many characters it had."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    skipped = 0
    while chunk := handle.readline(MAX_LINE_BYTES):
        skipped += len(decoder.decode(chunk.removesuffix(b"\n")))
        if chunk.endswith(b"\n"):
            break
    return skipped


def _cut(line: tuple[str, int]) -> str:
    text, omitted = line
    if len(text) <= MAX_LINE_CHARS and not omitted:
        return text
    more = len(text) - MAX_LINE_CHARS + omitted
    return text[:MAX_LINE_CHARS] + f"… [line cut: {more} more characters]"


def _count_lines(handle: BinaryIO) -> int:
    lines, last = 0, b"\n"
    while chunk := handle.read(1 << 20):
        lines += chunk.count(b"\n")
        last = chunk[-1:]
    return lines + (last != b"\n")
