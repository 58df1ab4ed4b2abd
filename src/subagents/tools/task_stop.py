"""TaskStop: stop a running task (a background agent, a shell) by id or agent name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from subagents.tools import descriptions
from subagents.tools.base import (
    CallInfo,
    LazyInput,
    Tool,
    ToolContext,
    ToolOutput,
)
from subagents.tools.task_output import task_service

if TYPE_CHECKING:
    from subagents.tools.inputs.task_stop import TaskStopInput


class TaskStopTool(Tool["TaskStopInput"]):
    name = "TaskStop"
    aliases = ("KillShell",)
    description = descriptions.TASK_STOP
    input_model = LazyInput["TaskStopInput"]("subagents.tools.inputs.task_stop", "TaskStopInput")
    requires_permission = False

    async def call(self, args: TaskStopInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        return await task_service(ctx).stop(args.task_id)
