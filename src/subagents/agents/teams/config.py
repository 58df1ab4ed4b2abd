"""The team config: who leads, who is a member, which members are alive (docs/teams.md).

``TeamDirectory`` is the project's folder of teams. Each change of a config is a read-modify-write
under ``teams/<team>/.lock``; the file is rewritten atomically. A member's liveness is its
``isActive`` flag *and*, for a process teammate, its recorded process still running with the same
start identity (a reused pid is not taken for the teammate).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from subagents.agents.teams.files import (
    LEAD_NAME,
    TeamError,
    checked_name,
    locked,
    read_json,
    write_json,
)
from subagents.state import ProjectState
from subagents.store.process_identity import ProcessIdentity, is_alive


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(kw_only=True, frozen=True)
class TeamPaths:
    """The files of one team."""

    root: Path
    tasks: Path

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    def mailbox(self, name: str) -> Path:
        return self.root / "mailboxes" / f"{name}.jsonl"

    def member_file(self, name: str, suffix: str) -> Path:
        return self.root / "members" / f"{name}{suffix}"


def member_alive(member: dict[str, Any]) -> bool:
    """Active, and (for a process teammate) its process still the one recorded."""
    if not member.get("isActive"):
        return False
    pid = member.get("pid")
    if member.get("backend") != "process" or not isinstance(pid, int):
        return True
    identity = ProcessIdentity(pid=pid, start_identity=member.get("pidStart"))
    return is_alive(identity, recorded_at=time.time())


class TeamDirectory:
    """The teams of one project (``<project state>/teams`` and ``/task-lists``)."""

    def __init__(self, state: ProjectState) -> None:
        self.state = state

    def paths(self, team_name: str) -> TeamPaths:
        name = checked_name(team_name, "team_name")
        return TeamPaths(
            root=self.state.root / "teams" / name, tasks=self.state.root / "task-lists" / name
        )

    def names(self) -> list[str]:
        folder = self.state.root / "teams"
        if not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir() if (p / "config.json").is_file())

    def load(self, team_name: str) -> dict[str, Any]:
        config = read_json(self.paths(team_name).config)
        if config is None:
            known = ", ".join(self.names()) or "none"
            raise TeamError(f"No team named {team_name!r} (teams in this project: {known})")
        return config

    def all(self) -> Iterator[dict[str, Any]]:
        for name in self.names():
            try:
                yield self.load(name)
            except TeamError:
                continue

    def create(
        self,
        team_name: str,
        description: str,
        *,
        lead_agent_id: str,
        lead_session_id: str,
        lead_agent_type: str,
        model: str,
        cwd: str,
    ) -> dict[str, Any]:
        paths = self.paths(team_name)
        with locked(paths.lock):
            if read_json(paths.config) is not None:
                raise TeamError(
                    f"A team named {team_name!r} already exists: choose another team_name"
                )
            created = now_ms()
            lead = {
                "agentId": lead_agent_id,
                "name": LEAD_NAME,
                "agentType": lead_agent_type,
                "model": model,
                "joinedAt": created,
                "cwd": cwd,
                "subscriptions": [],
                "backend": "lead",
                "isActive": True,
            }
            config = {
                "name": paths.root.name,
                "description": description,
                "createdAt": created,
                "leadAgentId": lead_agent_id,
                "leadSessionId": lead_session_id,
                "members": [lead],
            }
            write_json(paths.config, config)
            paths.tasks.mkdir(mode=0o700, parents=True, exist_ok=True)
        return config

    def update(self, team_name: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Apply ``change`` to the config under the team's lock and write it back."""
        paths = self.paths(team_name)
        with locked(paths.lock):
            config = self.load(team_name)
            change(config)
            write_json(paths.config, config)
        return config

    def set_member(self, team_name: str, name: str, **fields: Any) -> dict[str, Any]:
        def change(config: dict[str, Any]) -> None:
            member = find_member(config, name)
            if member is None:
                raise TeamError(f"Team {team_name!r} has no member named {name!r}")
            member.update(fields)

        return self.update(team_name, change)

    def delete(self, team_name: str) -> dict[str, Any]:
        """Remove the team's config, mailboxes and task list; refused while a teammate lives."""
        paths = self.paths(team_name)
        with locked(paths.lock):
            config = self.load(team_name)
            active = [m["name"] for m in teammates(config) if member_alive(m)]
            if active:
                raise TeamError(
                    f"Team {team_name!r} still has active members: {', '.join(active)}. Ask "
                    'them to shut down (SendMessage with {"type": "shutdown_request"}) and '
                    "delete the team once they have"
                )
            shutil.rmtree(paths.tasks, ignore_errors=True)
            for child in paths.root.iterdir():
                if child.name != ".lock":
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
        shutil.rmtree(paths.root, ignore_errors=True)
        return config


def find_member(config: dict[str, Any], name_or_id: str) -> dict[str, Any] | None:
    members: list[dict[str, Any]] = config.get("members", [])
    for member in members:
        if member.get("name") == name_or_id or member.get("agentId") == name_or_id:
            return member
    return None


def teammates(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Every member but the lead."""
    return [m for m in config.get("members", []) if m.get("name") != LEAD_NAME]


def public_view(config: dict[str, Any]) -> dict[str, Any]:
    """The config as ``teams show --json`` prints it: each member's liveness checked now."""
    members = [{**m, "isActive": member_alive(m)} for m in config.get("members", [])]
    return {**config, "members": members}
