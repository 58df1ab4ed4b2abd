"""``TeamMembership``: which team an agent belongs to, under which name, and as what."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from subagents.agents.teams.config import TeamDirectory, TeamPaths
from subagents.agents.teams.files import LEAD_NAME
from subagents.agents.teams.mailbox import Mailbox
from subagents.agents.teams.tasks import TaskList


@dataclass(kw_only=True, frozen=True)
class TeamMembership:
    """An agent's place in a team (``AgentFrame.team``)."""

    team_name: str
    name: str
    directory: TeamDirectory
    approvals: dict[str, asyncio.Future[dict[str, Any]]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )
    """This member's requests waiting for the lead's answer, by request id (``plan_approval``,
    ``permission_relay``); its mailbox watcher settles them."""

    @property
    def is_lead(self) -> bool:
        return self.name == LEAD_NAME

    @property
    def paths(self) -> TeamPaths:
        return self.directory.paths(self.team_name)

    @property
    def tasks(self) -> TaskList:
        return TaskList(self.paths.tasks)

    def mailbox(self, name: str | None = None) -> Mailbox:
        return Mailbox(self.paths.mailbox(name or self.name))

    @asynccontextmanager
    async def awaiting_lead(
        self, message: dict[str, Any]
    ) -> AsyncIterator[asyncio.Future[dict[str, Any]]]:
        """Send the lead ``message``, a request carrying its ``request_id``, and yield the future
        its answer settles; the id is forgotten on the way out (answered, stopped or failed)."""
        request_id = str(message["request_id"])
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.approvals[request_id] = answer
        try:
            await asyncio.to_thread(self.mailbox(LEAD_NAME).put, message)
            yield answer
        finally:
            self.approvals.pop(request_id, None)
