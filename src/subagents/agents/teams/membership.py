"""``TeamMembership``: which team an agent belongs to, under which name, and as what."""

from __future__ import annotations

import asyncio
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
    """This member's plans waiting for the lead, by request id (``plan_approval``)."""

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
