"""The Edit tool's input, imported at the first call (``tools.base.LazyInput``); until
then a run sends the schema from ``tools/input_schemas.json``."""

from __future__ import annotations

from pydantic import Field

from subagents.tools.base import BuiltinToolInput
from subagents.tools.paths import PathText


class EditInput(BuiltinToolInput):
    file_path: PathText = Field(description="The path of the file to modify.")
    old_string: str = Field(description="The exact text to replace.")
    new_string: str = Field(description="The text to replace it with (must differ).")
    replace_all: bool = Field(
        default=False, description="Replace every occurrence of old_string (default false)."
    )
