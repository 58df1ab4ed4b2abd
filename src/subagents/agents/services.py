"""``SessionServices``: what a session offers its agents' tools (``tools.base.ToolServices``).

Every ``ToolContext`` of a session — the main agent's and every child's, whose contexts share
the parent's ``services`` — points at one ``SessionServices``. It composes the session's parts
without them knowing each other: the shared ``AgentRuntime`` (configuration, definitions,
models, hooks, permissions, the record of every run), the children (``children.Children``),
the task service behind TaskOutput/TaskStop (``task_service.AgentTasks``), the background
shells and the durable records. The Agent tool (``agents/agent_tool.py``) narrows
``ctx.services`` to this class; the other tools see only the ``ToolServices`` Protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.agents.agent_run import AgentJob
from subagents.agents.children import Children
from subagents.agents.foreground import run_foreground
from subagents.agents.messaging import AgentMessage, send_message
from subagents.agents.runtime import AgentRuntime
from subagents.agents.shells import BackgroundShellManager
from subagents.agents.task_service import AgentTasks
from subagents.store.durable import DurableRecords
from subagents.tools.base import CallInfo, TaskService, ToolContext, ToolError, ToolOutput

if TYPE_CHECKING:
    from subagents.agents.teams.host import TeamHost


@dataclass(kw_only=True, eq=False)
class SessionServices:
    """One session's services, reached by its tools through ``ToolContext.services``."""

    runtime: AgentRuntime
    children: Children
    task_service: AgentTasks
    shells: BackgroundShellManager | None = None
    teams: TeamHost | None = None
    """The lead's side of its team (docs/teams.md); None where teams are not offered."""

    @property
    def session_id(self) -> str:
        return self.runtime.session_id

    @property
    def records(self) -> DurableRecords | None:
        """The durable records of children (None: this session keeps no sidecars)."""
        return self.children.records

    @property
    def tasks(self) -> TaskService:
        return self.task_service

    def transcript_for(self, agent_id: str) -> Path | None:
        return self.runtime.transcript_for(agent_id)

    async def start_background_shell(
        self, command: str, ctx: ToolContext, description: str | None
    ) -> ToolOutput:
        if self.shells is None or self.runtime.config.background_disabled:
            raise ToolError("Background shells are disabled in this session")
        return await self.shells.start(command, ctx, description)

    async def send_message(
        self, ctx: ToolContext, to: str, message: str, summary: str | None
    ) -> ToolOutput:
        message_ = AgentMessage(to=to, message=message, summary=summary)
        return await send_message(self.runtime, self.children, ctx, message_, teams=self.teams)

    async def run_foreground(
        self, job: AgentJob, info: CallInfo, *, name: str | None = None
    ) -> ToolOutput:
        """Run a child while its parent waits (it may be moved to the background)."""
        return await run_foreground(self.children, job, info, name=name)

    def launch(self, job: AgentJob, *, name: str | None = None) -> ToolOutput:
        """Start a background child; ``async_launched`` at once."""
        return self.children.launch(job, name=name)
