"""The Glob tool's input, imported at the first call (``tools.base.LazyInput``); until
then a run sends the schema from ``tools/input_schemas.json``."""

from __future__ import annotations

from pydantic import Field

from subagents.tools.base import BuiltinToolInput
from subagents.tools.paths import PathText


class GlobInput(BuiltinToolInput):
    pattern: str = Field(description="The glob pattern to match files against.")
    path: PathText | None = Field(
        default=None,
        description="The directory to search in (default: the working directory).",
    )
