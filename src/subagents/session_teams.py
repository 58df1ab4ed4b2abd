"""The lead's side of an agent team for a ``Session`` (docs/teams.md).

Teams are opt-in (``SUBAGENTS_AGENT_TEAMS=1``): this module is imported only then, and it
imports the team modules only when it builds the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from subagents.agents import recovery
from subagents.config import RuntimeConfig
from subagents.hooks.engine import HookEngine
from subagents.loop.inbox import Inbox
from subagents.permissions.checker import PermissionChecker
from subagents.session_options import SessionOptions
from subagents.state import ProjectState
from subagents.store.protocol import Store

if TYPE_CHECKING:
    from subagents.agents.teams.host import TeamHost


def team_host(
    options: SessionOptions,
    *,
    config: RuntimeConfig,
    state: ProjectState,
    store: Store,
    inbox: Inbox,
    hooks: HookEngine | None,
    permissions: PermissionChecker,
    session_id: str,
) -> TeamHost:
    """The host of the session's teams; teammate processes get this session's model string
    and options (a model object cannot cross: its teammates run in-process)."""
    from subagents.agents.teams.config import TeamDirectory
    from subagents.agents.teams.host import (
        LOCAL_LAUNCHER,
        TeamHost,
        TeammateLauncher,
        WorkerOptions,
    )
    from subagents.agents.teams.permission_relay import LeadRelay

    worker = WorkerOptions(
        model=options.model if isinstance(options.model, str) else None,
        home=str(state.home),
        agents_json=options.agents_json,
        settings_file=str(options.settings_file) if options.settings_file else None,
        permission_mode=options.permission_mode,
        load_settings=options.load_settings,
        trusted=options.trusted,
    )

    async def reconcile(_name: str, _agent_id: str) -> None:
        await recovery.reconcile_orphans(store, state, hooks=hooks)

    asks = options.ask_callback
    relay = None
    if asks is not None:
        grant = permissions.add_session_rules
        relay = LeadRelay(ask=asks, lead_session_id=session_id, grant=grant)
    executor = options.executor
    return TeamHost(
        directory=TeamDirectory(state),
        root_inbox=inbox,
        quiet_ms=config.team_quiet_ms,
        # An executor that runs children elsewhere may start teammate processes there too.
        launcher=executor if isinstance(executor, TeammateLauncher) else LOCAL_LAUNCHER,
        worker=worker,
        on_crash=reconcile,
        relay=relay,
    )
