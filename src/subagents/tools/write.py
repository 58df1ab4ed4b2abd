"""The Write tool: create or overwrite a file with the given content.

The path is confined like every file path (``confined.open_tool_path``: opened as written when
no component is a symlink, else resolved first); since the *resolved* path is checked, the
parent directories created for it are inside the root too, even when the model's path went
through a symlinked directory. The file is opened component by component below the root,
refusing symlinks, so a symlink swapped in after the check cannot carry the write outside; only
regular files are written. The new mtime is
recorded in ``ctx.read_files``: the agent wrote the file, so it knows its current content.
"""

from __future__ import annotations

import asyncio
import os
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
from subagents.tools.confined import on_local_disks, open_tool_path

if TYPE_CHECKING:
    from subagents.tools.inputs.write import WriteInput

DESCRIPTION = descriptions.WRITE


class WriteTool(Tool["WriteInput"]):
    """Create or overwrite one file inside the allowed roots."""

    name = "Write"
    description = DESCRIPTION
    input_model = LazyInput["WriteInput"]("subagents.tools.inputs.write", "WriteInput")

    async def call(self, args: WriteInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        data = encode_text(args.content, "content")
        if len(data) <= INLINE_WRITE_BYTES and on_local_disks(ctx):
            path, existed, mtime_ns = write_path(args.file_path, data, ctx)
        else:  # a long write, or a file system that may block: off the loop
            path, existed, mtime_ns = await asyncio.to_thread(write_path, args.file_path, data, ctx)
        ctx.read_files[path] = mtime_ns
        if existed:
            message = f"The file {path} has been overwritten ({_size(args.content)})."
        else:
            message = f"File created successfully at: {path} ({_size(args.content)})."
        return ToolOutput(content=message, metadata={"files_changed": [path]})


def encode_text(text: str, field: str) -> bytes:
    """UTF-8 bytes of a model's text; ``surrogateescape`` keeps bytes that Edit read raw."""
    try:
        return text.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"`{field}` holds a lone surrogate (U+{ord(text[exc.start]):04X}) at character "
            f"{exc.start}, which UTF-8 cannot store. Replace it and try again."
        ) from None


INLINE_WRITE_BYTES = 256 * 1024
"""Writes up to this size to a local file system run on the event loop (``confined.is_local``):
the page cache takes them at once."""


def write_path(raw: str, data: bytes, ctx: ToolContext) -> tuple[str, bool, int]:
    """Write ``data`` to the file ``raw`` names below its root without following any symlink
    on the way (``confined.open_tool_path``); returns (path, existed before, new mtime ns)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    path, opened = open_tool_path(
        raw, ctx, flags, explain=_explain, denied_reads=False, make_parents=True
    )
    try:
        write_all(opened.fd, data)
        return path, opened.existed, os.fstat(opened.fd).st_mtime_ns
    except OSError as exc:
        raise ToolError(f"Cannot write {path}: {exc.strerror or exc}") from None
    finally:
        os.close(opened.fd)


def _explain(path: str, exc: OSError) -> ToolError:
    if isinstance(exc, IsADirectoryError):
        return ToolError(f"{path} is a directory; give the path of a file to write.")
    return ToolError(f"Cannot write {path}: {exc.strerror or exc}")


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _size(content: str) -> str:
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    return f"{lines} line{'s' if lines != 1 else ''}"
