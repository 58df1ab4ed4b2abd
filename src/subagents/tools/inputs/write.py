"""The Write tool's input, imported at the first call (``tools.base.LazyInput``); until
then a run sends the schema from ``tools/input_schemas.json``."""

from __future__ import annotations

from pydantic import Field

from subagents.tools.base import BuiltinToolInput
from subagents.tools.paths import PathText


class WriteInput(BuiltinToolInput):
    file_path: PathText = Field(description="The path of the file to write.")
    content: str = Field(description="The full content to write to the file.")
