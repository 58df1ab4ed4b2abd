"""The Write tool: create or overwrite a file with the given content.

The path is confined like every file path (``resolve_path``); since the *resolved* path is
checked, the parent directories created for it are inside the root too, even when the model's
path went through a symlinked directory. The new mtime is recorded in ``ctx.read_files``: the
agent wrote the file, so it knows its current content.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import Field

from subagents.tools import descriptions
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolError, ToolInput, ToolOutput
from subagents.tools.paths import PathText, resolve_path

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
        existed, mtime_ns = await asyncio.to_thread(write_file, path, args.content)
        ctx.read_files[str(path)] = mtime_ns
        if existed:
            message = f"The file {path} has been overwritten ({_size(args.content)})."
        else:
            message = f"File created successfully at: {path} ({_size(args.content)})."
        return ToolOutput(content=message, metadata={"files_changed": [str(path)]})


def write_file(path: Path, content: str) -> tuple[bool, int]:
    """Write ``content`` (UTF-8, newlines as given); returns (existed before, new mtime ns)."""
    if path.is_dir():
        raise ToolError(f"{path} is a directory; give the path of a file to write.")
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="") as handle:
            handle.write(content)
    except OSError as exc:
        raise ToolError(f"Cannot write {path}: {exc.strerror or exc}") from None
    return existed, path.stat().st_mtime_ns


def _size(content: str) -> str:
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    return f"{lines} line{'s' if lines != 1 else ''}"
