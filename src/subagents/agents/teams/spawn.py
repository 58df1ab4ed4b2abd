"""A teammate: what it is to run (``TeammateSpawn``), its job on the one child path, and its
side of the team while it runs (``TeammateSide``), in a worker process or in the lead's.

``teammate_job`` is ``fresh.definition_spec`` + ``assembly.assemble`` with ``kind="teammate"``:
its definition's tools ∩ its host's, plus the task tools and SendMessage, never TeamCreate or
TeamDelete; its inbox is a ``TeamInbox``. ``TeammateSide`` connects that inbox to the member's
mailbox, goes idle after each turn (TeammateIdle hook, idle notification to the lead), ends the
teammate when it approved a shutdown or its lead is gone, and on the way out releases the tasks
it still owns and marks itself inactive.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from subagents.agents.agent_run import AgentFrame, AgentJob
from subagents.agents.assembly import assemble
from subagents.agents.fresh import ChildRequest, definition_spec
from subagents.agents.runtime import AgentRuntime
from subagents.agents.teams import permission_relay, plan_approval
from subagents.agents.teams.files import LEAD_NAME, TeamError
from subagents.agents.teams.inbox import MailboxWatcher, TeamInbox
from subagents.agents.teams.mailbox import new_message, render
from subagents.agents.teams.membership import TeamMembership
from subagents.loop.inbox import InboxItem
from subagents.messages import assistant_text
from subagents.tools.base import Tool, ToolContext

TEAM_TOOL_NAMES = frozenset({"TaskCreate", "TaskUpdate", "TaskList", "TaskGet", "SendMessage"})
IDLE_SUMMARY_CHARS = 200


@dataclass(kw_only=True)
class TeammateSpawn:
    """What a teammate is to run; a process teammate reads it from its spawn file."""

    team_name: str
    name: str
    agent_id: str
    agent_type: str
    prompt: str
    description: str
    cwd: str
    home: str
    lead_session_id: str
    lead_pid: int
    model: str | None = None
    mode: str | None = None
    permission_mode: str | None = None
    agents_json: str | None = None
    settings_file: str | None = None
    load_settings: bool = True
    trusted: bool = True
    ask_lead: bool = False
    """Its permission asks go to its lead's user (``permission_relay``); else it denies them."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> TeammateSpawn:
        try:
            return cls(**data)
        except TypeError as exc:
            raise TeamError(f"{where}: not a teammate spawn file ({exc})") from exc


def teammate_job(
    runtime: AgentRuntime,
    ctx: ToolContext,
    host: AgentFrame,
    spawn: TeammateSpawn,
    membership: TeamMembership,
    team_tools: Sequence[Tool[Any]],
    inbox: TeamInbox,
    agent_tool: Tool[Any] | None = None,
) -> AgentJob:
    """The teammate's job, assembled as a child of ``host`` (the lead, or a worker's host).
    ``agent_tool`` replaces the host's Agent tool (a teammate's hides name/team_name/mode)."""
    definition = runtime.definitions.find(spawn.agent_type)
    if definition is None:
        raise TeamError(f"Agent type {spawn.agent_type!r} not found for teammate {spawn.name}")
    request = ChildRequest(
        definition=definition,
        prompt=spawn.prompt,
        description=spawn.description,
        mode=spawn.mode,
        background=True,
        agent_id=spawn.agent_id,
    )
    spec = definition_spec(runtime, ctx, host, request)
    spec.kind = "teammate"
    spec.team = membership
    tools = [t for t in spec.tools if t.name not in TEAM_TOOL_NAMES] + list(team_tools)
    if agent_tool is not None:
        tools = [agent_tool if t.name == agent_tool.name else t for t in tools]
    spec.tools = tools
    spec.tool_schemas = None  # assembly builds the schemas of this list
    job = assemble(runtime, ctx, host, spec)
    job.inbox = inbox
    return job


class TeammateSide:
    """A running teammate's connection to its team (see the module docstring)."""

    def __init__(
        self,
        membership: TeamMembership,
        runtime: AgentRuntime,
        *,
        lead_alive: Callable[[], bool] | None = None,
    ) -> None:
        self.membership = membership
        self.runtime = runtime
        self.lead_alive = lead_alive
        self.mailbox = membership.mailbox()
        self.inbox = TeamInbox(self._idle)
        self.job: AgentJob | None = None
        self.watcher = MailboxWatcher(self.mailbox, self._arrived, on_tick=self._check_lead)
        self.inbox.before_idle = self.watcher.check

    def start(self, job: AgentJob) -> None:
        self.job = job
        self.watcher.start(f"mailbox:{self.membership.team_name}/{self.membership.name}")

    def _arrived(self, line: int, message: dict[str, Any]) -> None:
        if permission_relay.answered(self.membership, message):
            return  # a permission ask's answer: the model never asked, it never reads it
        plan_approval.answered(self.membership, message)  # a waiting ExitPlanMode goes on
        mailbox = self.mailbox
        self.inbox.put(
            InboxItem(
                id=str(message.get("id")),
                text=render(message),
                on_delivered=lambda: mailbox.advance(line),
            )
        )

    def _check_lead(self) -> None:
        if self.lead_alive is not None and not self.lead_alive():
            self.stop("its lead is gone")

    def stop(self, reason: str) -> None:
        """End now: the lead is gone, or the process was told to stop."""
        self.inbox.shut_down()
        if self.job is not None:
            self.job.ctx.abort.abort(reason)

    async def _idle(self) -> str | None:
        """TeammateIdle (exit 2 keeps it working), then the lead's idle notification."""
        name, team = self.membership.name, self.membership.team_name
        hooks = self.runtime.hooks
        if hooks is not None:
            feedback = await hooks.teammate_idle(name, team)
            if feedback:
                return feedback
        summary = ""
        if self.job is not None:
            for message in reversed(self.job.frame.messages):
                if message["role"] == "assistant":
                    summary = assistant_text(message).strip()[:IDLE_SUMMARY_CHARS]
                    break
        note = new_message(
            name,
            LEAD_NAME,
            f"{name} is idle and waiting for messages.",
            type="idle_notification",
            summary=summary or None,
        )
        await asyncio.to_thread(self.membership.mailbox(LEAD_NAME).put, note)
        return None

    async def finish(self) -> list[str]:
        """On the way out: stop watching, release owned tasks, mark the member inactive."""
        await self.watcher.stop()
        membership = self.membership
        released = membership.tasks.release_owned(membership.name)
        try:
            membership.directory.set_member(membership.team_name, membership.name, isActive=False)
        except TeamError:
            pass  # the team was deleted meanwhile
        return released


def parent_alive(pid: int) -> Callable[[], bool]:
    """True while ``pid`` is still this process's parent (a dead lead's children are
    re-parented, so the check needs no pid-reuse guard)."""
    return lambda: os.getppid() == pid


def write_spawn_file(path: Path, spawn: TeammateSpawn) -> None:
    from subagents.agents.teams.files import write_json

    write_json(path, spawn.to_dict())
