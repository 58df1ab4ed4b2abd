"""The Grep tool's input, imported at the first call (``tools.base.LazyInput``); until
then a run sends the schema from ``tools/input_schemas.json``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from subagents.tools.base import BuiltinToolInput
from subagents.tools.paths import PathText

OutputMode = Literal["content", "files_with_matches", "count"]


class GrepInput(BuiltinToolInput):
    pattern: str = Field(description="The regular expression to search for in file contents.")
    path: PathText | None = Field(
        default=None, description="File or directory to search (default: working directory)."
    )
    glob: str | None = Field(
        default=None, description='Glob to filter files, e.g. "*.js" or "*.{ts,tsx}".'
    )
    output_mode: OutputMode = Field(
        default="files_with_matches",
        description='"content", "files_with_matches" (default) or "count".',
    )
    case_insensitive: bool | None = Field(
        default=None, alias="-i", description="Case-insensitive search."
    )
    line_numbers: bool | None = Field(
        default=None, alias="-n", description="Show line numbers (content mode; default true)."
    )
    head_limit: int | None = Field(
        default=None, ge=0, description="Limit output to the first N results (0: no limit)."
    )
