"""``TeamMembership``: which team an agent belongs to, under which name, and as what."""

from __future__ import annotations

from dataclasses import dataclass

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
