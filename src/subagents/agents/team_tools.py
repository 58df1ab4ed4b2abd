"""The team tools (SPEC §11, §20; docs/teams.md): TeamCreate, TeamDelete, TaskCreate,
TaskUpdate, TaskList, TaskGet — and ``spawn_teammate``, the Agent tool's teammate path.

Each tool narrows ``ctx.owner`` to the caller's ``AgentFrame`` to find its team
(``frame.team``) and ``ctx.services`` to ``SessionServices`` for the lead's ``TeamHost``. Task
changes go through ``teams.tasks.TaskList``, whose rules hold across processes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

from pydantic import Field

from subagents.agents.agent_run import AgentFrame
from subagents.agents.services import SessionServices
from subagents.agents.teams.config import find_member
from subagents.agents.teams.files import LEAD_NAME, TeamError, checked_name
from subagents.agents.teams.membership import TeamMembership
from subagents.agents.teams.tasks import TaskChange, blocked_ids
from subagents.events import SystemEvent
from subagents.tools import descriptions
from subagents.tools.base import (
    BuiltinToolInput,
    CallInfo,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
)

_NO_SESSION = "Team tools need a session runtime; run them inside a Session"


def _frame(ctx: ToolContext) -> AgentFrame:
    frame = ctx.owner
    if not isinstance(frame, AgentFrame):
        raise ToolError(_NO_SESSION)
    return frame


def _services(ctx: ToolContext) -> SessionServices:
    services = ctx.services
    if not isinstance(services, SessionServices) or services.teams is None:
        raise ToolError(_NO_SESSION)
    return services


def _team(ctx: ToolContext) -> TeamMembership:
    team = _frame(ctx).team
    if team is None:
        raise ToolError("You are not in a team: the lead creates one with TeamCreate first")
    return team


async def _off_loop(function: Any, *args: Any, **kwargs: Any) -> Any:
    """File locks may wait for another process: never on the event loop."""
    try:
        return await asyncio.to_thread(function, *args, **kwargs)
    except TeamError as exc:
        raise ToolError(str(exc)) from exc


# -- TeamCreate / TeamDelete -------------------------------------------------------------------


class TeamCreateInput(BuiltinToolInput):
    team_name: str = Field(min_length=1, description="Name of the new team (letters, digits, -, _)")
    description: str = Field(default="", description="What the team is working on")


class TeamCreateTool(Tool[TeamCreateInput]):
    name = "TeamCreate"
    description = descriptions.TEAM_CREATE
    input_model = TeamCreateInput
    requires_permission = False

    async def call(self, args: TeamCreateInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        frame, services = _frame(ctx), _services(ctx)
        host = services.teams
        assert host is not None
        if frame.is_teammate or frame.depth > 0:
            raise ToolError("Only the main agent can create a team; teammates cannot nest")
        if frame.team is not None:
            raise ToolError(
                f"You already lead team {frame.team.team_name!r}: a lead leads one team at a "
                "time (TeamDelete it first)"
            )
        runtime = services.runtime
        directory = host.directory
        try:
            name = checked_name(args.team_name, "team_name")
        except TeamError as exc:
            raise ToolError(str(exc)) from exc
        config = await _off_loop(
            directory.create,
            name,
            args.description,
            lead_agent_id=ctx.agent.agent_id,
            lead_session_id=runtime.session_id,
            lead_agent_type=ctx.agent.agent_type,
            model=frame.model.name,
            cwd=str(ctx.cwd),
        )
        frame.team = TeamMembership(team_name=name, name=LEAD_NAME, directory=directory)
        host.lead(frame.team)
        _team_event(services, ctx, "team_created", name, 0)
        paths = directory.paths(name)
        return ToolOutput(
            content=(
                f"Team {name!r} created; you are its lead ({LEAD_NAME}). Task list: "
                f"{paths.tasks}. Next: TaskCreate the work, then spawn teammates with the Agent "
                f"tool (team_name={name!r}, name=...)."
            ),
            metadata={"team_name": name, "config_path": str(paths.config), "team": config},
        )


class TeamDeleteInput(BuiltinToolInput):
    team_name: str | None = Field(default=None, description="The team (default: yours)")


class TeamDeleteTool(Tool[TeamDeleteInput]):
    name = "TeamDelete"
    description = descriptions.TEAM_DELETE
    input_model = TeamDeleteInput
    requires_permission = False

    async def call(self, args: TeamDeleteInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        frame, services = _frame(ctx), _services(ctx)
        host = services.teams
        assert host is not None
        team = frame.team
        if team is None or not team.is_lead:
            raise ToolError("You lead no team: there is nothing to delete")
        if args.team_name and args.team_name != team.team_name:
            raise ToolError(f"You lead team {team.team_name!r}, not {args.team_name!r}")
        config = await _off_loop(host.directory.delete, team.team_name)
        count = len(config.get("members", [])) - 1
        frame.team = None
        await host.left()
        _team_event(services, ctx, "team_deleted", team.team_name, count)
        return ToolOutput(
            content=f"Team {team.team_name!r} deleted (config, mailboxes and task list removed).",
            metadata={"team_name": team.team_name},
        )


def _team_event(
    services: SessionServices, ctx: ToolContext, subtype: str, team: str, count: int
) -> None:
    data = {"team_name": team, "teammate_count": count, "lead_agent_type": ctx.agent.agent_type}
    services.runtime.emit(SystemEvent(agent=ctx.agent, subtype=subtype, data=data))


# -- the task list -----------------------------------------------------------------------------


class TaskCreateInput(BuiltinToolInput):
    subject: str = Field(min_length=1, description="A short imperative title")
    description: str = Field(default="", description="What needs doing, and what done means")
    activeForm: str | None = Field(default=None, description='Shown while it runs ("Running X")')
    metadata: dict[str, Any] | None = Field(default=None, description="Extra data to attach")


class TaskCreateTool(Tool[TaskCreateInput]):
    name = "TaskCreate"
    description = descriptions.TASK_CREATE
    input_model = TaskCreateInput
    requires_permission = False

    async def call(self, args: TaskCreateInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        team = _team(ctx)
        tasks = team.tasks
        task = await _off_loop(
            tasks.create,
            args.subject,
            args.description,
            active_form=args.activeForm,
            metadata=args.metadata,
        )
        hooks = _services(ctx).runtime.hooks
        if hooks is not None:
            teammate = None if team.is_lead else team.name
            reason = await hooks.task_created(
                task["id"], args.subject, args.description, teammate, team.team_name
            )
            if reason is not None:
                await _off_loop(tasks.delete, task["id"])
                raise ToolError(f"TaskCreated hook refused the task (deleted): {reason}")
        return ToolOutput(
            content=f"Task #{task['id']} created: {args.subject}", metadata={"task": task}
        )


class TaskUpdateInput(BuiltinToolInput):
    taskId: str = Field(min_length=1, description="The task's id")
    subject: str | None = None
    description: str | None = None
    activeForm: str | None = None
    status: Literal["pending", "in_progress", "completed", "deleted"] | None = None
    owner: str | None = Field(default=None, description='A member name; "" unassigns')
    addBlocks: list[str] | None = Field(default=None, description="Tasks that wait for this one")
    addBlockedBy: list[str] | None = Field(default=None, description="Tasks this one waits for")
    metadata: dict[str, Any] | None = None


class TaskUpdateTool(Tool[TaskUpdateInput]):
    name = "TaskUpdate"
    description = descriptions.TASK_UPDATE
    input_model = TaskUpdateInput
    requires_permission = False

    async def call(self, args: TaskUpdateInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        team = _team(ctx)
        change = TaskChange(
            subject=args.subject,
            description=args.description,
            active_form=args.activeForm,
            status=args.status,
            owner=args.owner,
            add_blocks=[str(i) for i in args.addBlocks or []],
            add_blocked_by=[str(i) for i in args.addBlockedBy or []],
            metadata=args.metadata,
        )
        if args.owner:
            await _check_owner(team, args.owner)
        task = await _off_loop(
            team.tasks.update, str(args.taskId), change, by=team.name, is_lead=team.is_lead
        )
        status = task["status"]
        owner = f", owner {task['owner']}" if task.get("owner") else ""
        return ToolOutput(
            content=f"Task #{task['id']} updated: {status}{owner}", metadata={"task": task}
        )


async def _check_owner(team: TeamMembership, owner: str) -> None:
    config = await _off_loop(team.directory.load, team.team_name)
    if find_member(config, owner) is None:
        names = ", ".join(m["name"] for m in config.get("members", []))
        raise ToolError(f"owner {owner!r} is not a member of team {team.team_name} ({names})")


class TaskListInput(BuiltinToolInput):
    pass


class TaskListTool(Tool[TaskListInput]):
    name = "TaskList"
    description = descriptions.TASK_LIST
    input_model = TaskListInput
    requires_permission = False

    def is_read_only(self, args: TaskListInput) -> bool:
        return True

    def is_concurrency_safe(self, args: TaskListInput) -> bool:
        return True

    async def call(self, args: TaskListInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        team = _team(ctx)
        tasks = await _off_loop(team.tasks.all)
        blocked = blocked_ids(tasks)
        lines = [_task_line(t, t["id"] in blocked) for t in tasks]
        text = "\n".join(lines) if lines else "No tasks yet."
        return ToolOutput(content=text, metadata={"tasks": tasks})


def _task_line(task: dict[str, Any], blocked: bool) -> str:
    owner = f" (owner: {task['owner']})" if task.get("owner") else ""
    waits = ""
    if blocked:
        waits = " [blocked by " + ", ".join(f"#{b}" for b in task["blockedBy"]) + "]"
    return f"#{task['id']} [{task['status']}] {task['subject']}{owner}{waits}"


class TaskGetInput(BuiltinToolInput):
    taskId: str = Field(min_length=1, description="The task's id")


class TaskGetTool(Tool[TaskGetInput]):
    name = "TaskGet"
    description = descriptions.TASK_GET
    input_model = TaskGetInput
    requires_permission = False

    def is_read_only(self, args: TaskGetInput) -> bool:
        return True

    def is_concurrency_safe(self, args: TaskGetInput) -> bool:
        return True

    async def call(self, args: TaskGetInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        team = _team(ctx)
        task = await _off_loop(team.tasks.get, str(args.taskId))
        if task is None:
            raise ToolError(f"Task #{args.taskId} not found")
        return ToolOutput(content=json.dumps(task, indent=2), metadata={"task": task})


def task_tools() -> list[Tool[Any]]:
    """The task tools every team member holds."""
    return [TaskCreateTool(), TaskUpdateTool(), TaskListTool(), TaskGetTool()]


def lead_tools() -> list[Tool[Any]]:
    """The main agent's team tools (when teams are on)."""
    return [TeamCreateTool(), TeamDeleteTool(), *task_tools()]
