"""A teammate worker process: ``subagents teammate-worker SPAWN_FILE`` (docs/teams.md).

The worker builds a ``Session`` with its lead's options (same model string, settings,
definitions, permission mode, and the lead's session id), makes a host frame holding the lead's
tool set, and runs the teammate as that frame's child on the one assembly path
(``teams.spawn.teammate_job`` → ``Children.start`` → ``child_run.run_child``), so its sidecar,
transcript and SubagentStart/SubagentStop are those of any child. It ends when the teammate
approved a shutdown (exit 0), or — exit 1 — when its lead's process is gone, on SIGTERM, or when
its loop failed; either way it first releases the tasks it still owns and marks itself inactive.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

from subagents.agents.agent_run import AgentRun
from subagents.agents.agent_tool import AgentTool
from subagents.agents.project_context import load_project_context
from subagents.agents.team_tools import task_tools
from subagents.agents.teams.config import TeamDirectory
from subagents.agents.teams.files import TeamError
from subagents.agents.teams.host import PARENT_ENV
from subagents.agents.teams.membership import TeamMembership
from subagents.agents.teams.permission_relay import LeadAsker
from subagents.agents.teams.spawn import TeammateSide, TeammateSpawn, parent_alive, teammate_job
from subagents.events import AgentRef
from subagents.session import Session, SessionOptions
from subagents.tools.send_message import SendMessageTool


def read_spawn_file(path: Path) -> TeammateSpawn:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TeamError(f"{path}: cannot read the spawn file ({exc})") from exc
    if not isinstance(data, dict):
        raise TeamError(f"{path}: expected a JSON object")
    return TeammateSpawn.from_dict(data, str(path))


def worker_session(spawn: TeammateSpawn) -> Session:
    return Session(
        SessionOptions(
            model=spawn.model or "local",
            cwd=Path(spawn.cwd),
            home=Path(spawn.home),
            session_id=spawn.lead_session_id,
            agents_json=spawn.agents_json,
            settings_file=Path(spawn.settings_file) if spawn.settings_file else None,
            permission_mode=spawn.permission_mode,
            load_settings=spawn.load_settings,
            trusted=spawn.trusted,
            background_wait_ms=0,
        )
    )


async def serve(spawn: TeammateSpawn) -> int:
    """Run one teammate to its end; the exit code (0: it approved a shutdown)."""
    session = worker_session(spawn)
    runtime = session.runtime
    runtime.project_context = await load_project_context(session.cwd)
    ref = AgentRef(agent_id=spawn.lead_session_id, agent_type="main")
    host_run = AgentRun(ref=ref, prompt=spawn.prompt, model=session.model.name)
    runtime.register(host_run)
    tools = session.main_tools()
    frame, ctx = session.main_frame(host_run, tools, "", [], (session.cwd,))
    membership = TeamMembership(
        team_name=spawn.team_name, name=spawn.name, directory=TeamDirectory(session.state)
    )
    # Its parent is its lead, or the Ray host that launched it for the lead (``PARENT_ENV``).
    parent = os.environ.get(PARENT_ENV, "")
    side = TeammateSide(
        membership,
        runtime,
        lead_alive=parent_alive(int(parent) if parent.isdigit() else spawn.lead_pid),
    )
    if spawn.ask_lead:  # its lead's user answers its asks; the checker bounds each wait
        session.permissions.ask_callback = LeadAsker(team=membership).ask
    team_tools = [*task_tools(), SendMessageTool()]
    agent_tool = AgentTool(background_available=not session.config.background_disabled)
    job = teammate_job(
        runtime, ctx, frame, spawn, membership, team_tools, side.inbox, agent_tool.for_teammate()
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, side.stop, f"stopped by {sig.name}")
    child = session.background.start(job, name=spawn.name)
    session.registry.mark_notified(spawn.agent_id)  # its lead hears from it by mailbox
    side.start(job)
    try:
        await asyncio.gather(child.task, return_exceptions=True)
    finally:
        session.background.finalize(child)
        await side.finish()
        await session.shutdown()
    completed = child.run.status == "completed"
    return 0 if side.inbox.approved and completed else 1
