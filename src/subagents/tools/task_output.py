"""TaskOutput: the durable, full result of a background task, optionally waiting for it.

Completion arrives by itself as a notification; this tool is for when the full text is needed
(the notification inlines a capped report) or for waiting on a task explicitly. It is not a
way to poll.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from subagents.tools import descriptions
from subagents.tools.base import (
    CallInfo,
    LazyInput,
    TaskService,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
)

if TYPE_CHECKING:
    from subagents.tools.inputs.task_output import TaskOutputInput

MAX_TIMEOUT_MS = 600_000


def task_service(ctx: ToolContext) -> TaskService:
    service = ctx.services.tasks if ctx.services is not None else None
    if service is None:
        raise ToolError("Tasks are not available in this context")
    return service


class TaskOutputTool(Tool["TaskOutputInput"]):
    name = "TaskOutput"
    aliases = ("AgentOutputTool", "BashOutputTool")
    description = descriptions.TASK_OUTPUT
    input_model = LazyInput["TaskOutputInput"](
        "subagents.tools.inputs.task_output", "TaskOutputInput"
    )
    max_result_chars = 160_000

    def is_read_only(self, args: TaskOutputInput) -> bool:
        return True

    def is_concurrency_safe(self, args: TaskOutputInput) -> bool:
        return True

    async def call(self, args: TaskOutputInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        timeout_s = min(args.timeout, MAX_TIMEOUT_MS) / 1000
        return await task_service(ctx).output(args.task_id, block=args.block, timeout_s=timeout_s)
