"""TaskStop: stop a running task (a background agent, a shell) by id or agent name."""

from __future__ import annotations

from pydantic import Field

from subagents.tools import descriptions
from subagents.tools.base import BuiltinToolInput, CallInfo, Tool, ToolContext, ToolOutput
from subagents.tools.task_output import task_service


class TaskStopInput(BuiltinToolInput):
    task_id: str = Field(min_length=1, description="The task id (or agent name) to stop")


class TaskStopTool(Tool[TaskStopInput]):
    name = "TaskStop"
    aliases = ("KillShell",)
    description = descriptions.TASK_STOP
    input_model = TaskStopInput
    requires_permission = False

    async def call(self, args: TaskStopInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        return await task_service(ctx).stop(args.task_id)
