"""The TaskOutput tool's input, imported at the first call (``tools.base.LazyInput``); until
then a run sends the schema from ``tools/input_schemas.json``."""

from __future__ import annotations

from pydantic import Field

from subagents.tools.base import BuiltinToolInput

DEFAULT_TIMEOUT_MS = 30_000


class TaskOutputInput(BuiltinToolInput):
    task_id: str = Field(min_length=1, description="The task id (or agent name)")
    block: bool = Field(default=True, description="Wait for the task to finish")
    timeout: int = Field(
        default=DEFAULT_TIMEOUT_MS, gt=0, description="Longest wait in ms (max 600000)"
    )
