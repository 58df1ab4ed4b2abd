"""The NotebookEdit tool's input, imported at the first call (``tools.base.LazyInput``); until
then a run sends the schema from ``tools/input_schemas.json``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from subagents.tools.base import BuiltinToolInput

EditMode = Literal["replace", "insert", "delete"]


class NotebookEditInput(BuiltinToolInput):
    notebook_path: str = Field(description="The notebook (.ipynb) to edit.")
    cell_id: str | None = Field(
        default=None, description="Id of the cell to edit (or its 0-based index)."
    )
    new_source: str = Field(default="", description="The new source of the cell.")
    cell_type: Literal["code", "markdown"] | None = Field(
        default=None, description="Cell type; required for insert."
    )
    edit_mode: EditMode = Field(default="replace", description="replace, insert or delete.")
