"""The Write tool: create or overwrite a file with the given content.

The path is confined like every file path (``resolve_path``); since the *resolved* path is
checked, the parent directories created for it are inside the root too, even when the model's
path went through a symlinked directory. The file is then opened component by component below
the root, refusing symlinks (``confined.open_confined``), so a symlink swapped in after the
check cannot carry the write outside; only regular files are written. The new mtime is
recorded in ``ctx.read_files``: the agent wrote the file, so it knows its current content.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic import Field

from subagents.tools import descriptions
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolError, ToolInput, ToolOutput
from subagents.tools.confined import open_confined
from subagents.tools.paths import PathText, allowed_roots, resolve_path

DESCRIPTION = descriptions.WRITE


class WriteInput(ToolInput):
    file_path: PathText = Field(description="The path of the file to write.")
    content: str = Field(description="The full content to write to the file.")


class WriteTool(Tool[WriteInput]):
    """Create or overwrite one file inside the allowed roots."""

    name = "Write"
    description = DESCRIPTION
    input_model = WriteInput

    async def call(self, args: WriteInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        path = resolve_path(args.file_path, ctx)
        data = encode_text(args.content, "content")
        roots = allowed_roots(ctx)
        existed, mtime_ns = await asyncio.to_thread(write_file, path, data, roots)
        ctx.read_files[str(path)] = mtime_ns
        if existed:
            message = f"The file {path} has been overwritten ({_size(args.content)})."
        else:
            message = f"File created successfully at: {path} ({_size(args.content)})."
        return ToolOutput(content=message, metadata={"files_changed": [str(path)]})


def encode_text(text: str, field: str) -> bytes:
    """UTF-8 bytes of a model's text; ``surrogateescape`` keeps bytes that Edit read raw."""
    try:
        return text.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"`{field}` holds a lone surrogate (U+{ord(text[exc.start]):04X}) at character "
            f"{exc.start}, which UTF-8 cannot store. Replace it and try again."
        ) from None


def write_file(path: Path, data: bytes, roots: tuple[Path, ...]) -> tuple[bool, int]:
    """Write ``data`` below its root without following any symlink on the way (see
    ``confined.open_confined``); returns (existed before, new mtime ns)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        opened = open_confined(path, roots, flags, make_parents=True)
    except IsADirectoryError:
        raise ToolError(f"{path} is a directory; give the path of a file to write.") from None
    except OSError as exc:
        raise ToolError(f"Cannot write {path}: {exc.strerror or exc}") from None
    try:
        write_all(opened.fd, data)
        return opened.existed, os.fstat(opened.fd).st_mtime_ns
    except OSError as exc:
        raise ToolError(f"Cannot write {path}: {exc.strerror or exc}") from None
    finally:
        os.close(opened.fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _size(content: str) -> str:
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    return f"{lines} line{'s' if lines != 1 else ''}"
