"""The Edit tool: exact string replacement in one file.

An edit must say precisely what it changes: ``old_string`` has to occur exactly once, unless
``replace_all`` asks for every occurrence, so an ambiguous edit fails (saying how often the text
occurs) instead of silently changing the wrong place. Files are decoded with
``surrogateescape`` and written back the same way, so bytes that are not UTF-8 and the file's
own line endings survive an edit untouched.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
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
from subagents.tools.confined import is_local, on_local_disks, open_tool_path
from subagents.tools.write import encode_text, write_all

if TYPE_CHECKING:
    from subagents.tools.inputs.edit import EditInput

SNIPPET_CONTEXT_LINES = 4
ENCODING = "utf-8"
ERRORS = "surrogateescape"
MAX_EDIT_BYTES = 32 * 1024 * 1024

DESCRIPTION = descriptions.EDIT


@dataclass(kw_only=True, slots=True)
class EditResult:
    """What an edit did: the new content, where the first replacement starts, how many."""

    content: str
    first_index: int
    replacements: int
    inserted: str
    mtime_ns: int = 0


class EditTool(Tool["EditInput"]):
    """Replace an exact, unique string in a file (or every occurrence with ``replace_all``)."""

    name = "Edit"
    description = DESCRIPTION
    input_model = LazyInput["EditInput"]("subagents.tools.inputs.edit", "EditInput")

    async def call(self, args: EditInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        if args.old_string == args.new_string:
            raise ToolError(
                "No changes to make: old_string and new_string are exactly the same. "
                "Give the text to replace and a different replacement."
            )
        edited = _edit_small(args, ctx) if on_local_disks(ctx) else None
        if edited is None:  # a long file, or a file system that may block: off the loop
            edited = await asyncio.to_thread(edit_path, args, ctx)
        path, result = edited
        ctx.read_files[path] = result.mtime_ns
        if result.replacements > 1:
            head = (
                f"The file {path} has been updated. All {result.replacements} occurrences of "
                "old_string were replaced."
            )
        else:
            head = f"The file {path} has been updated."
        snippet = numbered_snippet(result.content, result.first_index, result.inserted)
        content = (
            f"{head} Here is the result of running `cat -n` on a snippet of the edited file:\n"
            f"{snippet}"
        )
        return ToolOutput(content=content, metadata={"files_changed": [path]})


INLINE_EDIT_BYTES = 256 * 1024
"""Files up to this size on a local file system are edited on the event loop."""


def _edit_small(args: EditInput, ctx: ToolContext) -> tuple[str, EditResult] | None:
    """The edit done on the loop for a small file on a local file system; None otherwise
    (closed again, for ``edit_path`` in a worker thread)."""
    path, fd = _open(args.file_path, ctx, creating=args.old_string == "")
    status = os.fstat(fd)
    if status.st_size > INLINE_EDIT_BYTES or not is_local(status.st_dev):
        os.close(fd)
        return None
    return path, _edit_open(fd, path, args)


def edit_path(args: EditInput, ctx: ToolContext) -> tuple[str, EditResult]:
    """Apply the edit on disk; ``ToolError`` explains any reason it cannot.

    The file is opened once (read and write, below its root, no symlink followed, the read
    rules checked on its resolved path: ``confined.open_tool_path``), so the file changed is
    the file read: Edit shows the lines it changed, so a file the read rules deny is refused."""
    path, fd = _open(args.file_path, ctx, creating=args.old_string == "")
    return path, _edit_open(fd, path, args)


def _edit_open(fd: int, path: str, args: EditInput) -> EditResult:
    """The edit of the file open on ``fd`` (closed when done)."""
    try:
        original = _load(fd, path)
        result = replace_text(original, args, path)
        data = encode_text(result.content, "new_string")
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            write_all(fd, data)
            os.ftruncate(fd, len(data))
            result.mtime_ns = os.fstat(fd).st_mtime_ns
        except OSError as exc:
            raise ToolError(f"Cannot write {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return result


def _open(raw: str, ctx: ToolContext, *, creating: bool) -> tuple[str, int]:
    """A read-write descriptor; a missing file is created only when the edit creates it."""
    flags = os.O_RDWR | (os.O_CREAT if creating else 0)
    path, opened = open_tool_path(raw, ctx, flags, explain=_explain, make_parents=creating)
    return path, opened.fd


def _explain(path: str, exc: OSError) -> ToolError:
    if isinstance(exc, IsADirectoryError):
        return ToolError(f"{path} is a directory; Edit changes files.")
    if isinstance(exc, FileNotFoundError):
        return ToolError(
            f"File does not exist: {path}. Use Write to create a new file, or Edit with an "
            "empty old_string."
        )
    return ToolError(f"Cannot open {path}: {exc.strerror or exc}")


def _load(fd: int, path: str) -> str:
    """The file's text (size-capped; binary files refused)."""
    size = os.fstat(fd).st_size
    if size > MAX_EDIT_BYTES:
        raise ToolError(
            f"{path} is {size:,} bytes, more than the {MAX_EDIT_BYTES // (1024 * 1024)} MiB Edit "
            "changes at once. Use Bash (sed, a script) for a file this large."
        )
    try:
        raw = _read_all(fd, size)
    except OSError as exc:
        raise ToolError(f"Cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_EDIT_BYTES:
        raise ToolError(f"{path} grew past {MAX_EDIT_BYTES:,} bytes while it was read.")
    if raw.find(0, 0, 8192) >= 0:  # a NUL byte (``in`` would copy the slice, try an int first)
        raise ToolError(
            f"{path} looks like a binary file (it contains NUL bytes); Edit only changes text "
            "files."
        )
    return raw.decode(ENCODING, errors=ERRORS)


def _read_all(fd: int, size: int) -> bytes:
    """Up to ``MAX_EDIT_BYTES + 1`` bytes from ``fd`` (one ``read`` for a file not growing)."""
    chunks = [os.read(fd, size + 1)]
    total = len(chunks[0])
    while chunks[-1] and total <= MAX_EDIT_BYTES:
        chunks.append(os.read(fd, MAX_EDIT_BYTES + 1 - total))
        total += len(chunks[-1])
    return b"".join(chunks)


def replace_text(original: str, args: EditInput, path: Path | str) -> EditResult:
    """The replacement itself, pure: unique match, ``replace_all``, or file creation."""
    old, new = args.old_string, args.new_string
    if old == "":
        if original.strip():
            raise ToolError(
                f"old_string is empty but {path} already has content. An empty old_string "
                "only creates a new file; give the exact text to replace."
            )
        return EditResult(content=new, first_index=0, replacements=1, inserted=new)
    count = original.count(old)
    if count == 0 and "\r\n" in original and "\r\n" not in old:
        # The model writes "\n"; a CRLF file keeps its own endings.
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = original.count(old)
    if count == 0:
        raise ToolError(
            f"String to replace not found in {path}. old_string must match the file exactly, "
            "including whitespace and indentation; Read the file again to copy the exact text."
        )
    if count > 1 and not args.replace_all:
        raise ToolError(
            f"Found {count} matches of old_string in {path}, but replace_all is false. To "
            "replace only one occurrence, add more surrounding context to old_string so it "
            "matches exactly once; to replace every occurrence, set replace_all to true."
        )
    first = original.index(old)
    content = original.replace(old, new) if args.replace_all else original.replace(old, new, 1)
    return EditResult(content=content, first_index=first, replacements=count, inserted=new)


def numbered_snippet(content: str, index: int, inserted: str) -> str:
    """``cat -n`` style lines around the text inserted at ``index``, with a little context."""
    lines = content.splitlines()
    if not lines:
        return "(the file is now empty)"
    first_line = content.count("\n", 0, index)
    last_line = first_line + inserted.count("\n")
    start = max(first_line - SNIPPET_CONTEXT_LINES, 0)
    stop = min(last_line + SNIPPET_CONTEXT_LINES + 1, len(lines))
    return "\n".join(f"{n + 1:>6}\t{lines[n]}" for n in range(start, stop))
