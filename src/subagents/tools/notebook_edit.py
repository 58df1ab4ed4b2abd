"""``NotebookEdit``: replace, insert or delete one cell of a Jupyter notebook (``.ipynb``).

The notebook is read as JSON (no Jupyter dependency), checked to be a notebook (a ``cells``
list), changed in memory and written back with the layout Jupyter itself writes (one-space
indent, a final newline), so a diff shows only the cell that changed. Cells are found by their
``id`` (nbformat 4.5+) or, for a number, by 0-based index. Replacing a code cell clears its
outputs and execution count: they belonged to the old source. The path is confined like every
file tool's: the notebook is opened once, read-write, below its root with no symbolic link
followed (``confined.open_tool_path``), and written back through that descriptor, so the file
changed is the file read and a link swapped in after the path was checked cannot lead the
write outside.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagents.tools import descriptions
from subagents.tools.base import (
    CallInfo,
    LazyInput,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
)
from subagents.tools.confined import open_tool_path
from subagents.tools.paths import resolve_path
from subagents.tools.write import encode_text, write_all

if TYPE_CHECKING:
    from subagents.tools.inputs.notebook_edit import NotebookEditInput

MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024


class NotebookEditTool(Tool["NotebookEditInput"]):
    name = "NotebookEdit"
    description = descriptions.NOTEBOOK_EDIT
    input_model = LazyInput["NotebookEditInput"](
        "subagents.tools.inputs.notebook_edit", "NotebookEditInput"
    )

    async def call(self, args: NotebookEditInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        path = resolve_path(args.notebook_path, ctx)
        if path.suffix != ".ipynb":
            raise ToolError(f"{path} is not a notebook (.ipynb); use Edit for other files.")
        opened, message, mtime_ns = await asyncio.to_thread(edit_notebook, args, ctx)
        ctx.read_files[opened] = mtime_ns
        return ToolOutput(content=message, metadata={"files_changed": [opened]})


def edit_notebook(args: NotebookEditInput, ctx: ToolContext) -> tuple[str, str, int]:
    """(the resolved path, the answer, the new mtime) of the edit, made through one
    descriptor of the notebook (read rules are not the question here: the call's permission
    check covers the write, as for Write)."""
    path, opened = open_tool_path(
        args.notebook_path, ctx, os.O_RDWR, explain=_explain, denied_reads=False
    )
    fd = opened.fd
    try:
        if not path.endswith(".ipynb"):  # a link named .ipynb leading to another file
            raise ToolError(f"{path} is not a notebook (.ipynb); use Edit for other files.")
        message = _edit(fd, Path(path), args)
        return path, message, os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)


def _explain(path: str, exc: OSError) -> ToolError:
    if isinstance(exc, (FileNotFoundError, IsADirectoryError)):
        return ToolError(f"{path} does not exist or is not a regular file.")
    return ToolError(f"Cannot open {path}: {exc.strerror or exc}")


def _edit(fd: int, path: Path, args: NotebookEditInput) -> str:
    notebook = _load(fd, path)
    cells: list[dict[str, Any]] = notebook["cells"]
    if args.edit_mode == "insert":
        if args.cell_type is None:
            raise ToolError("cell_type is required to insert a cell: 'code' or 'markdown'.")
        at = 0 if args.cell_id is None else _find(cells, args.cell_id) + 1
        cell = _new_cell(args.cell_type, args.new_source, notebook)
        cells.insert(at, cell)
        done = f"Inserted a {args.cell_type} cell at index {at}"
    else:
        if args.cell_id is None:
            raise ToolError(f"cell_id is required to {args.edit_mode} a cell.")
        index = _find(cells, args.cell_id)
        if args.edit_mode == "delete":
            del cells[index]
            done = f"Deleted cell {args.cell_id} (index {index})"
        else:
            _replace(cells[index], args)
            done = f"Replaced the source of cell {args.cell_id} (index {index})"
    data = encode_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", "new_source")
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        write_all(fd, data)
        os.ftruncate(fd, len(data))
    except OSError as exc:
        raise ToolError(f"Cannot write {path}: {exc.strerror or exc}") from None
    return f"{done} in {path}; it now has {len(cells)} cells."


def _load(fd: int, path: Path) -> dict[str, Any]:
    try:
        raw = _read_capped(fd)
    except OSError as exc:
        raise ToolError(f"Cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_NOTEBOOK_BYTES:
        raise ToolError(f"{path} is larger than {MAX_NOTEBOOK_BYTES // (1024 * 1024)} MiB.")
    try:
        notebook = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ToolError(f"{path} is not valid notebook JSON: {exc}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise ToolError(f"{path} is not a Jupyter notebook: it has no 'cells' list.")
    if not all(isinstance(cell, dict) for cell in notebook["cells"]):
        raise ToolError(f"{path} is not a Jupyter notebook: a cell is not an object.")
    return notebook


def _read_capped(fd: int) -> bytes:
    """Up to ``MAX_NOTEBOOK_BYTES + 1`` bytes from ``fd``."""
    chunks, total = [], 0
    while total <= MAX_NOTEBOOK_BYTES:
        chunk = os.read(fd, MAX_NOTEBOOK_BYTES + 1 - total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _find(cells: list[dict[str, Any]], cell_id: str) -> int:
    for index, cell in enumerate(cells):
        if cell.get("id") == cell_id:
            return index
    if cell_id.strip().isdigit() and int(cell_id) < len(cells):
        return int(cell_id)
    known = ", ".join(str(c.get("id", i)) for i, c in enumerate(cells[:20]))
    raise ToolError(f"No cell {cell_id!r} in the notebook (cells: {known or 'none'}).")


def _source(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _replace(cell: dict[str, Any], args: NotebookEditInput) -> None:
    cell["source"] = _source(args.new_source)
    if args.cell_type is not None and args.cell_type != cell.get("cell_type"):
        cell["cell_type"] = args.cell_type
    if cell.get("cell_type") == "code":
        cell["outputs"] = []
        cell["execution_count"] = None
    else:
        cell.pop("outputs", None)
        cell.pop("execution_count", None)


def _new_cell(cell_type: str, source: str, notebook: dict[str, Any]) -> dict[str, Any]:
    cell: dict[str, Any] = {"cell_type": cell_type, "metadata": {}, "source": _source(source)}
    if cell_type == "code":
        cell.update(outputs=[], execution_count=None)
    minor = notebook.get("nbformat_minor")
    if notebook.get("nbformat", 4) >= 4 and isinstance(minor, int) and minor >= 5:
        cell["id"] = secrets.token_hex(4)  # nbformat 4.5+ cells carry ids
    return cell
