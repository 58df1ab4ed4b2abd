"""A read-only, concurrency-safe test tool shared by the per-call path tests: the call the
allow-at-once permission path exists for, and one that reports progress once per call."""

from __future__ import annotations

from subagents import CallInfo, Tool, ToolContext, ToolInput, ToolOutput


class StepInput(ToolInput):
    path: str


class StepTool(Tool[StepInput]):
    """Read-only: allowed by the mode alone; reports progress once per call."""

    name = "Step"
    description = "Take a step."
    input_model = StepInput

    def is_read_only(self, args: StepInput) -> bool:
        return True

    def is_concurrency_safe(self, args: StepInput) -> bool:
        return True

    async def call(self, args: StepInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        info.progress({"at": args.path})
        return ToolOutput(content=f"stepped {args.path}")
