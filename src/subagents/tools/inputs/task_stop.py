"""The TaskStop tool's input, imported at the first call (``tools.base.LazyInput``); until
then a run sends the schema from ``tools/input_schemas.json``."""

from __future__ import annotations

from pydantic import Field

from subagents.tools.base import BuiltinToolInput


class TaskStopInput(BuiltinToolInput):
    task_id: str = Field(min_length=1, description="The task id (or agent name) to stop")
