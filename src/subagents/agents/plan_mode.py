"""``ExitPlanMode``: leave ``plan`` mode with an approved plan, or stay in it.

An agent in ``plan`` mode may only read. When its plan is ready it calls ``ExitPlanMode(plan)``;
the plan is approved or not, and the answer — with the plan — is the tool result:

* interactive (the session has an ask callback, and this agent may prompt): the user decides;
* headless: the permission mode decides. The main agent's ``plan`` mode was chosen by the user,
  so with nobody to ask it stays (unless an ``ExitPlanMode`` allow rule pre-approves); a child
  put in ``plan`` by its definition or its Agent call leaves it when its parent is not itself in
  ``plan`` — the parent's mode is the user's standing answer.

Approved, the agent's permission mode becomes the mode it would have without plan mode: its
parent's for a child (never above it), ``default`` for the main agent. Rejected, it stays in
``plan`` and is told why. The tool is always in the tool array (the array never depends on the
mode); outside ``plan`` mode a call is an error.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from subagents.agents.agent_run import AgentFrame
from subagents.permissions.checker import PermissionChecker, PermissionRequest
from subagents.permissions.modes import PermissionMode, parse_mode
from subagents.tools import descriptions
from subagents.tools.base import (
    CallInfo,
    LazyInput,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
)

if TYPE_CHECKING:  # imported at the tool's first call (LazyInput)
    from subagents.tools.inputs.exit_plan_mode import ExitPlanModeInput


class ExitPlanModeTool(Tool["ExitPlanModeInput"]):
    name = "ExitPlanMode"
    description = descriptions.EXIT_PLAN_MODE
    input_model = LazyInput["ExitPlanModeInput"](
        "subagents.tools.inputs.exit_plan_mode", "ExitPlanModeInput"
    )
    requires_permission = False
    """Approval is this tool's own business (below), not a rule on the call."""

    def is_read_only(self, args: ExitPlanModeInput) -> bool:
        return True  # plan mode must not deny the way out of it

    async def call(self, args: ExitPlanModeInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        frame = ctx.owner
        checker = frame.permissions if isinstance(frame, AgentFrame) else None
        if not isinstance(frame, AgentFrame) or not isinstance(checker, PermissionChecker):
            raise ToolError("ExitPlanMode needs a session runtime; run it inside a Session")
        if checker.context.mode != "plan":
            raise ToolError(
                f"You are not in plan mode (mode: {checker.context.mode}): there is nothing to "
                "exit. Go ahead with the task."
            )
        target = exit_mode(frame)
        approved, by = await _decide(checker, frame, target, args.plan, ctx)
        metadata = {"plan": args.plan, "approved": approved, "mode": target if approved else "plan"}
        if not approved:
            text = (
                f"The plan was not approved ({by}). You are still in plan mode and may only "
                "read. Revise the plan if you can improve it; otherwise end your turn with the "
                "plan as your answer."
            )
            return ToolOutput(content=text, metadata=metadata)
        checker.context = replace(checker.context, mode=target)
        frame.permission_mode = target
        text = (
            f"The plan was approved ({by}). Permission mode is now '{target}': carry out the "
            f"plan, step by step.\n\nApproved plan:\n{args.plan}"
        )
        return ToolOutput(content=text, metadata=metadata)


def exit_mode(frame: AgentFrame) -> PermissionMode:
    """The mode after plan mode: the parent's for a child (its ceiling), else ``default``."""
    if frame.mode_ceiling is None:
        return "default"
    return parse_mode(frame.mode_ceiling)


async def _decide(
    checker: PermissionChecker,
    frame: AgentFrame,
    target: PermissionMode,
    plan: str,
    ctx: ToolContext,
) -> tuple[bool, str]:
    if target == "plan":
        return False, "the agent that started you is in plan mode itself"
    team = frame.team
    if team is not None and not team.is_lead:
        from subagents.agents.teams.plan_approval import ask_lead

        return await ask_lead(team, plan, ctx.abort)  # a teammate's plan is its lead's call
    if any(
        rule.tool == "ExitPlanMode" and rule.specifier is None for rule in checker.context.allow
    ):
        return True, "by an ExitPlanMode allow rule"
    can_prompt = checker.ask_callback is not None and not checker.context.denies_asks
    if can_prompt and (not checker.background or checker.route_background_asks):
        request = PermissionRequest(
            tool_name="ExitPlanMode",
            input={"plan": plan},
            agent=ctx.agent,
            subject="Leave plan mode and carry out this plan",
            reason=plan,
            background=checker.background,
        )
        assert checker.ask_callback is not None
        try:
            granted = await checker.ask_callback(request)
        except Exception as exc:  # a broken prompt fails closed
            return False, f"the approval prompt failed: {type(exc).__name__}"
        return (True, "by the user") if granted else (False, "the user rejected it")
    if frame.mode_ceiling is None:
        return False, (
            "this headless run has no one to approve it, and the session was started in plan mode"
        )
    return True, f"by the permission mode '{target}' of the agent that started you"
