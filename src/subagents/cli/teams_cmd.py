"""``subagents teams list|show NAME|delete NAME [--json]`` and the hidden ``teammate-worker``.

Teams live under the project's state folder (docs/teams.md). ``delete`` refuses while a teammate
is still active (its process alive), as TeamDelete does. ``teammate-worker SPAWN_FILE`` is how a
lead starts a teammate process; it is not meant to be typed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from subagents.agents.teams.config import TeamDirectory


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    teams = subparsers.add_parser("teams", help="list, inspect and delete agent teams")
    actions = teams.add_subparsers(dest="teams_action", metavar="ACTION", required=True)
    for name, help_text in (
        ("list", "the teams of this project"),
        ("show", "one team: config, members (alive or not) and its task list"),
        ("delete", "delete a team whose teammates have all stopped"),
    ):
        action = actions.add_parser(name, help=help_text)
        if name != "list":
            action.add_argument("team_name", metavar="NAME")
        action.add_argument("--json", action="store_true", dest="as_json", help="print JSON")
        action.add_argument("--cwd", dest="team_cwd", metavar="DIR", help="project directory")
        action.set_defaults(handler=run)
    worker = subparsers.add_parser("teammate-worker", help=argparse.SUPPRESS)
    worker.add_argument("spawn_file", metavar="SPAWN_FILE")
    worker.set_defaults(handler=run_worker)


def run(args: argparse.Namespace) -> int:
    # Imported here: building the parser (every ``subagents`` start) must not load teams.
    from subagents.agents.teams.config import TeamDirectory
    from subagents.agents.teams.files import TeamError
    from subagents.state import ProjectState

    cwd = Path(args.team_cwd or getattr(args, "cwd", None) or Path.cwd())
    directory = TeamDirectory(ProjectState.for_cwd(cwd))
    try:
        if args.teams_action == "list":
            return _list(directory, args.as_json)
        if args.teams_action == "show":
            return _show(directory, args.team_name, args.as_json)
        config = directory.delete(args.team_name)
    except TeamError as exc:
        print(f"subagents teams: {exc}", file=sys.stderr)
        return 1
    if args.as_json:
        print(json.dumps({"deleted": config["name"]}))
    else:
        print(f"deleted team {config['name']}")
    return 0


def _summary(directory: TeamDirectory, config: dict[str, Any]) -> dict[str, Any]:
    from subagents.agents.teams.config import public_view, teammates

    view = public_view(config)
    tasks = _tasks(directory, config["name"])
    return {
        "name": config["name"],
        "description": config.get("description", ""),
        "createdAt": config.get("createdAt"),
        "leadSessionId": config.get("leadSessionId"),
        "members": len(teammates(view)),
        "activeMembers": sum(1 for m in teammates(view) if m["isActive"]),
        "tasks": len(tasks),
        "completedTasks": sum(1 for t in tasks if t["status"] == "completed"),
    }


def _tasks(directory: TeamDirectory, name: str) -> list[dict[str, Any]]:
    from subagents.agents.teams.files import TeamError
    from subagents.agents.teams.tasks import TaskList

    try:
        return TaskList(directory.paths(name).tasks).all()
    except TeamError:
        return []


def _list(directory: TeamDirectory, as_json: bool) -> int:
    rows = [_summary(directory, config) for config in directory.all()]
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no teams")
    for row in rows:
        print(
            f"{row['name']}\t{row['activeMembers']}/{row['members']} active\t"
            f"{row['completedTasks']}/{row['tasks']} tasks done\t{row['description']}"
        )
    return 0


def _show(directory: TeamDirectory, name: str, as_json: bool) -> int:
    from subagents.agents.teams.config import public_view

    view = public_view(directory.load(name))
    tasks = _tasks(directory, name)
    if as_json:
        print(json.dumps({**view, "tasks": tasks}, indent=2))
        return 0
    print(f"team {view['name']}: {view.get('description', '')}")
    for member in view["members"]:
        state = "active" if member["isActive"] else "inactive"
        print(f"  {member['name']}\t{member['agentType']}\t{member['agentId']}\t{state}")
    for task in tasks:
        owner = task.get("owner") or "-"
        print(f"  #{task['id']}\t{task['status']}\t{owner}\t{task['subject']}")
    return 0


def run_worker(args: argparse.Namespace) -> int:
    from subagents.agents.teams.files import TeamError
    from subagents.teammate import read_spawn_file, serve

    try:
        spawn = read_spawn_file(Path(args.spawn_file))
        return asyncio.run(serve(spawn))
    except (TeamError, ValueError, OSError) as exc:
        print(f"subagents teammate-worker: {exc}", file=sys.stderr)
        return 2
