"""``NotebookEdit``: replace, insert or delete one cell of a Jupyter notebook (``.ipynb``).

The notebook is read as JSON (no Jupyter dependency), checked to be a notebook (a ``cells``
list), changed in memory and written back with the layout Jupyter itself writes (one-space
indent, a final newline), so a diff shows only the cell that changed. Cells are found by their
``id`` (nbformat 4.5+) or, for a number, by 0-based index. Replacing a code cell clears its
outputs and execution count: they belonged to the old source. The path is confined like every
file tool's.
"""

from __future__ import annotations

import asyncio
import json
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
from subagents.tools.paths import resolve_path

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
        message, mtime_ns = await asyncio.to_thread(edit_notebook, path, args)
        ctx.read_files[str(path)] = mtime_ns
        return ToolOutput(content=message, metadata={"files_changed": [str(path)]})


def edit_notebook(path: Path, args: NotebookEditInput) -> tuple[str, int]:
    notebook = _load(path)
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
    text = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"Cannot write {path}: {exc.strerror or exc}") from None
    return f"{done} in {path}; it now has {len(cells)} cells.", path.stat().st_mtime_ns


def _load(path: Path) -> dict[str, Any]:
    try:
        if not path.is_file():
            raise ToolError(f"{path} does not exist or is not a regular file.")
        with path.open("rb") as handle:
            raw = handle.read(MAX_NOTEBOOK_BYTES + 1)
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
