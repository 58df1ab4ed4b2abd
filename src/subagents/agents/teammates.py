"""The Agent tool's teammate path: ``Agent(team_name=T, name=N, …)`` from a team's lead.

The teammate is registered in the team config, then started — as a ``subagents teammate-worker``
process (``TeamHost.start_process``) or, in-process, as a child of the lead built by
``teams.spawn.teammate_job`` on the one assembly path — and the call returns
``teammate_spawned {teammate_id, name, team_name}`` at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from subagents.agents.agent_run import AgentFrame
from subagents.agents.services import SessionServices
from subagents.agents.team_tools import task_tools
from subagents.agents.teams.config import find_member, member_alive, now_ms
from subagents.agents.teams.files import LEAD_NAME, TeamError, checked_name
from subagents.agents.teams.host import TeamHost
from subagents.agents.teams.membership import TeamMembership
from subagents.agents.teams.spawn import TeammateSide, TeammateSpawn, teammate_job
from subagents.ids import new_id
from subagents.tools.base import Tool, ToolContext, ToolError, ToolOutput
from subagents.tools.send_message import SendMessageTool


async def spawn_teammate(
    services: SessionServices,
    ctx: ToolContext,
    frame: AgentFrame,
    *,
    team_name: str | None,
    name: str | None,
    agent_type: str,
    prompt: str,
    description: str,
    mode: str | None,
    agent_tool: Tool[Any] | None = None,
) -> ToolOutput:
    host = services.teams
    team = frame.team
    if host is None or team is None or not team.is_lead:
        raise ToolError("Spawning a teammate needs a team you lead: call TeamCreate first")
    if team_name and team_name != team.team_name:
        raise ToolError(f"You lead team {team.team_name!r}, not {team_name!r}")
    if not name:
        raise ToolError("A teammate needs a name (the Agent tool's name field)")
    try:
        member_name = checked_name(name, "name")
    except TeamError as exc:
        raise ToolError(str(exc)) from exc
    if member_name == LEAD_NAME:
        raise ToolError(f"{LEAD_NAME!r} is the lead's own name: choose another")
    if services.runtime.definitions.find(agent_type) is None:
        raise ToolError(f"Agent type {agent_type!r} not found")
    in_process = services.runtime.config.teammate_mode == "in-process" or not host.worker.model
    spawn = TeammateSpawn(
        team_name=team.team_name,
        name=member_name,
        agent_id=new_id("in_process_teammate"),
        agent_type=agent_type,
        prompt=prompt,
        description=description,
        cwd=str(ctx.cwd),
        home=host.worker.home,
        lead_session_id=services.runtime.session_id,
        lead_pid=_pid(),
        model=host.worker.model,
        mode=mode,
        permission_mode=host.worker.permission_mode or frame.permission_mode,
        agents_json=host.worker.agents_json,
        settings_file=host.worker.settings_file,
        load_settings=host.worker.load_settings,
        trusted=host.worker.trusted,
        ask_lead=host.relay is not None,
    )
    await _join(host, team, spawn, in_process, frame)
    if in_process:
        _start_in_process(services, host, ctx, frame, spawn, agent_tool)
    else:
        try:
            await host.start_process(spawn)
        except (OSError, TeamError) as exc:
            host.directory.set_member(team.team_name, member_name, isActive=False)
            raise ToolError(f"Could not start teammate {member_name}: {exc}") from exc
    return ToolOutput(
        content=(
            f"Teammate {member_name} spawned in team {team.team_name} (id {spawn.agent_id}). It "
            "works on its own and goes idle after each turn; you will hear from it when it "
            "messages you or goes idle. Talk to it with SendMessage."
        ),
        metadata={
            "status": "teammate_spawned",
            "teammate_id": spawn.agent_id,
            "name": member_name,
            "team_name": team.team_name,
        },
    )


async def _join(
    host: TeamHost, team: TeamMembership, spawn: TeammateSpawn, in_process: bool, frame: AgentFrame
) -> None:
    """Add the member to the config (a former member of the same name is replaced)."""

    def change(config: dict[str, Any]) -> None:
        existing = find_member(config, spawn.name)
        if existing is not None and member_alive(existing):
            raise TeamError(f"Team {team.team_name} already has an active member {spawn.name!r}")
        members = [m for m in config.get("members", []) if m.get("name") != spawn.name]
        members.append(
            {
                "agentId": spawn.agent_id,
                "name": spawn.name,
                "agentType": spawn.agent_type,
                "model": frame.model.name,
                "joinedAt": now_ms(),
                "cwd": spawn.cwd,
                "subscriptions": [],
                "backend": "in-process" if in_process else "process",
                "isActive": True,
            }
        )
        config["members"] = members

    try:
        await asyncio.to_thread(host.directory.update, team.team_name, change)
    except TeamError as exc:
        raise ToolError(str(exc)) from exc


def _start_in_process(
    services: SessionServices,
    host: TeamHost,
    ctx: ToolContext,
    frame: AgentFrame,
    spawn: TeammateSpawn,
    agent_tool: Tool[Any] | None,
) -> None:
    membership = TeamMembership(
        team_name=spawn.team_name, name=spawn.name, directory=host.directory
    )
    side = TeammateSide(membership, services.runtime)
    tools = [*task_tools(), SendMessageTool()]
    job = teammate_job(
        services.runtime, ctx, frame, spawn, membership, tools, side.inbox, agent_tool
    )
    children = services.children
    child = children.start(job, name=spawn.name)
    children.registry.mark_notified(spawn.agent_id)  # the lead hears from its team instead
    side.start(job)

    async def run() -> None:
        try:
            await asyncio.gather(child.task, return_exceptions=True)
        finally:
            children.finalize(child)
            await side.finish()

    task = asyncio.get_running_loop().create_task(run(), name=f"teammate:{spawn.name}")
    host.started_in_process(spawn.name, spawn.agent_id, task)


def _pid() -> int:
    import os

    return os.getpid()
