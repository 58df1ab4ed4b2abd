"""The TodoWrite tool's input, imported at the first call (``tools.base.LazyInput``); until
then a run sends the schema from ``tools/input_schemas.json``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from subagents.tools.base import BuiltinToolInput

TodoStatus = Literal["pending", "in_progress", "completed"]
MAX_TODOS = 100
MAX_CONTENT_CHARS = 500


class TodoItem(BuiltinToolInput):
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS, description="The step")
    status: TodoStatus = Field(description="pending, in_progress or completed")
    activeForm: str | None = Field(
        default=None, max_length=MAX_CONTENT_CHARS, description="The step as it is being done"
    )


class TodoWriteInput(BuiltinToolInput):
    todos: list[TodoItem] = Field(max_length=MAX_TODOS, description="The whole updated list")
