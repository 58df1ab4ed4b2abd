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
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, BinaryIO

from subagents.tools import descriptions
from subagents.tools.base import (
    CallInfo,
    LazyInput,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
)
from subagents.tools.confined import OpenedFile, is_local, on_local_disks, open_tool_path

if TYPE_CHECKING:
    from subagents.tools.inputs.read import ReadInput

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


@dataclass(kw_only=True, slots=True)
class _Excerpt:
    """Numbered lines taken from a file, and whether (and where) more would follow."""

    text: str
    first: int
    last: int
    more: bool


class ReadTool(Tool["ReadInput"]):
    """Read a text file as numbered lines; confined to the allowed roots."""

    name = "Read"
    description = DESCRIPTION
    input_model = LazyInput["ReadInput"]("subagents.tools.inputs.read", "ReadInput")
    # The tool caps its own output with a continuation hint; the generic cut must not hit first.
    max_result_chars = MAX_OUTPUT_CHARS + 1000

    def is_read_only(self, args: ReadInput) -> bool:
        return True

    def is_concurrency_safe(self, args: ReadInput) -> bool:
        return True

    async def call(self, args: ReadInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        read: tuple[str, int] | None = None
        if on_local_disks(ctx):
            path, opened = _open(args.file_path, ctx)
            read = _read_small(opened, path, args)
        if read is None:
            # A long file (streamed up to ``offset``), or a network or unknown file system
            # that may block for as long as it likes: not on the loop, where it would stop
            # every agent. Opened again there, so the thread owns its descriptor.
            path, (content, mtime_ns) = await asyncio.to_thread(_read_path, args, ctx)
        else:
            content, mtime_ns = read
        ctx.read_files[path] = mtime_ns
        return ToolOutput(content=content)


def _read_small(opened: OpenedFile, path: str, args: ReadInput) -> tuple[str, int] | None:
    """The answer and mtime from a small file on a local file system (one ``read``, on the
    loop); None for any other file (the descriptor is closed either way)."""
    stat = opened.stat
    try:
        if stat.st_size > MAX_FILE_BYTES:
            return None
        if not is_local(stat.st_dev):
            return None
        data = _whole(opened.fd, stat.st_size)
    finally:
        os.close(opened.fd)
    if data is None:
        return None
    if len(data) > MAX_LINE_BYTES:  # a line may be longer than is held of one: the general way
        return _answer(io.BytesIO(data), stat, path, args.offset, args.limit), stat.st_mtime_ns
    return _answer_again(data, path, args.offset, args.limit), stat.st_mtime_ns


_answers: dict[str, tuple[bytes, int | None, int | None, str]] = {}
"""The last short answer per path with the bytes it was made from: the answer is a function
of (bytes, path, offset, limit) alone, so bytes read now that equal those are answered with
it (one ``memcmp``) instead of decoding, splitting and numbering them again — children of a
fan-out read the same project files. Keyed by what was read, never by a ``stat``: a file
rewritten within one timestamp tick, at the same size, is a miss."""
_ANSWERS_KEPT = 128
_ANSWER_CHARS_KEPT = 16 * 1024
"""Only answers whose bytes and text are this short together are kept: at most ~2 M
characters in all."""


def _answer_again(data: bytes, path: str, offset: int | None, limit: int | None) -> str:
    """``_answer_short``, or its answer for the same bytes, path and range made before."""
    known = _answers.get(path)
    if known is not None and known[0] == data and known[1] == offset and known[2] == limit:
        return known[3]
    answer = _answer_short(data, path, offset, limit)
    if len(data) + len(answer) <= _ANSWER_CHARS_KEPT:
        if known is None and len(_answers) >= _ANSWERS_KEPT:
            # Start again (one call: sessions on other threads may read meanwhile, and taking
            # out the oldest entry by iterating could meet a dict another thread resized).
            _answers.clear()
        _answers[path] = (data, offset, limit, answer)
    return answer


def _whole(fd: int, size: int) -> bytes | None:
    """The file's bytes, or None when it has grown past ``MAX_FILE_BYTES`` since its ``fstat``
    (then it is streamed like a long file). A read shorter than asked for is the end of a
    regular file; one that returned less than ``size`` is confirmed by reading on."""
    chunks: list[bytes] = []
    total, wanted = 0, size + 1
    while True:
        chunk = os.read(fd, wanted)
        chunks.append(chunk)
        total += len(chunk)
        if total > MAX_FILE_BYTES:
            return None
        if not chunk or (len(chunk) < wanted and total == size):
            return chunk if len(chunks) == 1 else b"".join(chunks)
        wanted = MAX_FILE_BYTES + 1 - total


def _read_path(args: ReadInput, ctx: ToolContext) -> tuple[str, tuple[str, int]]:
    """Open and read (in a worker thread): the path, and the answer with the mtime."""
    path, opened = _open(args.file_path, ctx)
    with os.fdopen(opened.fd, "rb") as handle:
        stat = opened.stat
        return path, (_answer(handle, stat, path, args.offset, args.limit), stat.st_mtime_ns)


def _answer(
    handle: BinaryIO, stat: os.stat_result, path: str, offset: int | None, limit: int | None
) -> str:
    """The tool's answer for ``path`` from its content in ``handle``."""
    _check_readable(handle, stat, path, offset, limit)
    if stat.st_size == 0:
        return f"(The file {path} exists but is empty.)"
    start = max(offset or 1, 1)
    count = limit or DEFAULT_LINE_LIMIT
    excerpt = _numbered(bounded_lines(handle), start, count)
    if excerpt.last < excerpt.first:
        handle.seek(0)
        return _past_the_end(path, _count_lines(handle), start)
    return _with_continuation(excerpt)


def _answer_short(data: bytes, path: str, offset: int | None, limit: int | None) -> str:
    """``_answer`` for a file of at most ``MAX_LINE_BYTES`` held in ``data``: the same text,
    split at once instead of line by line (no line can be longer than is held of one)."""
    # ``find`` of the byte as an int: ``b"\x00" in`` first tries its operand as an int and
    # raises (and clears) a TypeError inside, and the slice would copy the first 8 KiB.
    if data.find(0, 0, BINARY_SNIFF_BYTES) >= 0:
        raise ToolError(_binary(path))
    if not data:
        return f"(The file {path} exists but is empty.)"
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if not lines[-1]:
        lines.pop()  # the newline that ends the last line
    if "\r" in text:
        lines = [line.removesuffix("\r") for line in lines]
    start = offset if offset is not None and offset > 1 else 1
    count = limit or DEFAULT_LINE_LIMIT
    window = lines[start - 1 : start - 1 + count]
    if not window:
        return _past_the_end(path, len(lines), start)
    size = len(data)
    # A file of at most MAX_LINE_CHARS bytes has no line longer than that: no ``max`` to take.
    if size + 8 * len(window) > MAX_OUTPUT_CHARS or (
        size > MAX_LINE_CHARS and max(map(len, window)) > MAX_LINE_CHARS
    ):
        return _with_continuation(_numbered(((line, 0) for line in lines), start, count))
    last = start + len(window) - 1
    # Numbers and lines interleaved and joined once (no string per numbered line).
    parts = [*window, *window]
    parts[0::2] = _line_numbers(start, last)
    parts[1::2] = window
    numbered = "".join(parts)
    if len(lines) <= last:
        return numbered
    return _with_continuation(_Excerpt(text=numbered, first=start, last=last, more=True))


_numbers: list[str] = []
"""``"\n     1\t"``, ``"\n     2\t"`` .. made as far as reads have needed (up to
``DEFAULT_LINE_LIMIT``): numbering a short file by slicing these costs a third of formatting
each number, and a process that only reads short files never formats 2,000."""


def _line_numbers(first: int, last: int) -> list[str]:
    """The prefixes of lines ``first``..``last``, for ``"".join`` with the lines between them:
    each but the first starts with the newline that ends the line before it."""
    if last <= DEFAULT_LINE_LIMIT:
        known = len(_numbers)
        if last > known:
            end = min(max(last, 2 * known), DEFAULT_LINE_LIMIT)
            _numbers.extend([f"\n{n:>6}\t" for n in range(known + 1, end + 1)])
        numbers = _numbers[first - 1 : last]
    else:
        numbers = [f"\n{n:>6}\t" for n in range(first, last + 1)]
    numbers[0] = numbers[0][1:]
    return numbers


def _past_the_end(path: str, total: int, start: int) -> str:
    return (
        f"(The file {path} has {total} lines; offset {start} is past its end. "
        "Use a smaller offset.)"
    )


def _with_continuation(excerpt: _Excerpt) -> str:
    if not excerpt.more:
        return excerpt.text
    return (
        f"{excerpt.text}\n\n(Showing lines {excerpt.first}-{excerpt.last}. More lines follow: "
        f"continue with offset={excerpt.last + 1}.)"
    )


def _binary(path: str) -> str:
    return f"{path} looks like a binary file (it contains NUL bytes); Read only shows text files."


def _open(raw: str, ctx: ToolContext) -> tuple[str, OpenedFile]:
    return open_tool_path(raw, ctx, os.O_RDONLY, explain=_explain)


def _explain(path: str, exc: OSError) -> ToolError:
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"File does not exist: {path}")
    if isinstance(exc, IsADirectoryError):
        return ToolError(
            f"{path} is a directory, not a file. Use Glob or Bash `ls` to list its contents."
        )
    return ToolError(f"Cannot read {path}: {exc.strerror or exc}")


def _check_readable(
    handle: BinaryIO, stat: os.stat_result, path: str, offset: int | None, limit: int | None
) -> None:
    if stat.st_size > MAX_FILE_BYTES and offset is None and limit is None:
        raise ToolError(
            f"File {path} is {stat.st_size:,} bytes, more than the {MAX_FILE_BYTES // 1024} KiB "
            "that can be read at once. Read it in parts with offset and limit (for example "
            "offset=1, limit=500), or use Grep to find the lines you need."
        )
    if b"\x00" in handle.read(BINARY_SNIFF_BYTES):
        raise ToolError(_binary(path))
    handle.seek(0)


def _numbered(every: Iterator[tuple[str, int]], start: int, count: int) -> _Excerpt:
    """Lines ``start``..``start+count-1`` of ``every`` (each as ``bounded_lines`` yields it)
    numbered ``cat -n`` style, cut at the output cap."""
    parts: list[str] = []
    size = 0
    last = start - 1
    lines = islice(every, start - 1, None)
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
