"""The Read tool's input, imported at the first call (``tools.base.LazyInput``); until
then a run sends the schema from ``tools/input_schemas.json``."""

from __future__ import annotations

from pydantic import Field

from subagents.tools.base import BuiltinToolInput
from subagents.tools.paths import PathText


class ReadInput(BuiltinToolInput):
    file_path: PathText = Field(description="The path of the file to read.")
    offset: int | None = Field(
        default=None,
        ge=0,
        description="The 1-based line number to start reading from (0 also means the first line).",
    )
    limit: int | None = Field(default=None, ge=1, description="The number of lines to read.")
