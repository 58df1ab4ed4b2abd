"""MCP servers in the agent system: the session's, a child's own, and what a crash leaves behind.

* ``session_servers`` loads the configuration (``mcp.sources``) and builds the session's
  ``McpServers`` — None when nothing is configured, so such a run imports none of the client;
  the group of every stdio server it starts is recorded in ``<project>/mcp/<session>.pids``,
  after a first line naming the owning process.
* ``reap_session_servers`` (at session start) kills the recorded groups of every such file
  whose owner is gone — a runtime killed with SIGKILL — with ``orphan_processes``' PID-reuse checks.
* ``attach_child_servers`` (the Agent tool, before a child is launched) starts the child's own
  servers from its definition's ``mcpServers`` (their groups recorded in the child's ``.pids``
  file, which recovery reads), adds their tools, and checks ``requiredMcpServers``: a pattern
  no usable server satisfies, after waiting up to 30 s for one still connecting, refuses the
  spawn. The scope rides on the spec to the job; ``child_run.run_child`` closes it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagents.agents.definitions import tool_base_name, tool_listed
from subagents.agents.orphan_processes import group_recorder, kill_leftovers, pids_path
from subagents.agents.runtime import AgentRuntime
from subagents.agents.spec import ChildSpec
from subagents.events import AgentRef, SystemEvent
from subagents.ids import new_id
from subagents.mcp.config import McpConfig
from subagents.mcp.sources import McpSources, load_mcp_config
from subagents.state import ProjectState, ensure_private_dir
from subagents.store.process_identity import pid_exists, start_identity
from subagents.tools.base import Tool, ToolError

if TYPE_CHECKING:
    from subagents.agents.schema import AgentDefinition
    from subagents.mcp.connection import ServerConnection
    from subagents.mcp.sdk_bridge import SdkMessenger
    from subagents.mcp.servers import McpServers, McpSettings

log = logging.getLogger(__name__)

OWNER_PREFIX = "owner"


def load_session_config(
    *,
    cwd: Path,
    state: ProjectState,
    settings: Mapping[str, Any],
    cli_configs: Sequence[str] = (),
    extra: Mapping[str, Any] | None = None,
    strict: bool = False,
    trusted: bool = True,
) -> McpConfig:
    """The session's servers, from every source (``McpConfigError`` for a bad --mcp-config)."""
    sources = McpSources(
        cwd=cwd,
        home=Path.home(),
        subagents_home=state.home,
        settings=settings,
        cli_configs=cli_configs,
        extra=extra,
        strict=strict,
        trusted=trusted,
    )
    return load_mcp_config(sources)


def session_servers(
    config: McpConfig,
    *,
    cwd: Path,
    state: ProjectState,
    session_id: str,
    sdk: SdkMessenger | None,
    warn: Any,
) -> McpServers | None:
    """The session's ``McpServers``, or None when no server is configured."""
    if not config.servers:
        return None
    from subagents.mcp.servers import McpServers, McpSettings

    settings = McpSettings.from_env(sdk=sdk)
    settings.warn = warn
    record = session_pids_path(state, session_id)
    return McpServers(config=config, cwd=cwd, settings=settings, on_spawn=_owned_recorder(record))


def session_pids_path(state: ProjectState, session_id: str) -> Path:
    return state.root / "mcp" / f"{session_id}.pids"


def _owned_recorder(path: Path) -> Any:
    """A recorder that writes the owner line before the first group."""
    written = False

    def record(pgid: int) -> None:
        nonlocal written
        if not written:
            try:
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                identity = start_identity(os.getpid()) or "-"
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "a") as handle:
                    handle.write(f"{OWNER_PREFIX} {os.getpid()} {identity}\n")
            except OSError as exc:
                log.warning("cannot record MCP server processes in %s: %s", path, exc)
                return
            written = True
        group_recorder(path)(pgid)

    return record


async def close_session_servers(
    servers: McpServers | None, state: ProjectState, session_id: str
) -> None:
    """Close the session's servers; their record is not needed once they are gone."""
    if servers is None:
        return
    await servers.close()
    session_pids_path(state, session_id).unlink(missing_ok=True)


def reap_session_servers(state: ProjectState) -> list[int]:
    """Kill the recorded server groups of sessions whose process is gone; remove their files."""
    folder = state.root / "mcp"
    try:
        files = [entry for entry in os.scandir(folder) if entry.name.endswith(".pids")]
    except FileNotFoundError:
        return []
    killed: list[int] = []
    for entry in files:
        path = Path(entry.path)
        if _owner_alive(path):
            continue
        killed += kill_leftovers(path)
        path.unlink(missing_ok=True)
    return killed


def _owner_alive(path: Path) -> bool:
    try:
        first = path.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0].split()
    except OSError:
        return True  # cannot tell: leave it
    if len(first) != 3 or first[0] != OWNER_PREFIX or not first[1].isdigit():
        return False
    pid, identity = int(first[1]), first[2]
    return pid_exists(pid) and (identity == "-" or start_identity(pid) == identity)


# -- a child's own servers --------------------------------------------------------------------


def brings_servers(definition: AgentDefinition) -> bool:
    """Whether a child of ``definition`` has servers to start or to wait for."""
    return bool(definition.mcp_servers or definition.required_mcp_servers)


async def attach_child_servers(runtime: AgentRuntime, spec: ChildSpec) -> None:
    """Start the servers ``spec``'s definition brings and check its required ones (see the
    module docstring); ``ToolError`` refuses the spawn, with every server it started closed."""
    definition = spec.definition
    if definition is None or not brings_servers(definition):
        return
    from subagents.mcp.servers import REQUIRED_WAIT_S, open_scope, wait_for_required

    spec.agent_id = spec.agent_id or new_id("local_agent")
    transcript = runtime.transcript_for(spec.agent_id)
    if transcript is not None:
        ensure_private_dir(transcript.parent)  # its .pids file is written before its transcript
    scope = await open_scope(
        definition.mcp_servers,
        session=runtime.mcp,
        settings=_settings(runtime),
        cwd=spec.workspace.cwd or runtime.cwd,
        source=f"agent {definition.name!r} ({definition.path or 'definition'})",
        on_spawn=group_recorder(pids_path(transcript)) if transcript is not None else None,
    )
    try:
        session = list(runtime.mcp.connections.values()) if runtime.mcp is not None else []
        visible = [*session, *scope.own]
        missing = await wait_for_required(definition.required_mcp_servers, visible, REQUIRED_WAIT_S)
    except BaseException:
        await scope.close()
        raise
    if missing:
        await scope.close()
        raise ToolError(refusal(definition.name, missing))
    spec.tools = [*spec.tools, *_added(spec.tools, scope.tools, definition.disallowed_tools)]
    spec.tool_schemas = None  # the definition's shared schemas lack these tools
    spec.mcp = scope


def _settings(runtime: AgentRuntime) -> McpSettings:
    if runtime.mcp is not None:
        return runtime.mcp.settings
    from subagents.mcp.servers import McpSettings

    settings = McpSettings.from_env()
    ref = AgentRef(agent_id=runtime.session_id, agent_type="main")

    def warn(message: str) -> None:
        runtime.emit(SystemEvent(agent=ref, subtype="warning", data={"message": message}))

    settings.warn = warn
    return settings


def _added(
    present: Sequence[Tool[Any]], offered: Sequence[Tool[Any]], disallowed: Sequence[str]
) -> list[Tool[Any]]:
    """The scope's tools the child does not hold yet, minus its ``disallowedTools``."""
    names = {tool.name for tool in present}
    denied = {tool_base_name(entry) for entry in disallowed}
    return [t for t in offered if t.name not in names and not tool_listed(t.name, denied)]


def refusal(agent_type: str, missing: Sequence[tuple[str, ServerConnection | None]]) -> str:
    """Why a spawn is refused, naming each missing server and what is wrong with it."""
    patterns = ", ".join(p for p, _c in missing)
    details = []
    for pattern, connection in missing:
        if connection is None:
            details.append(f"{pattern} (no configured server matches)")
        elif connection.status == "connected":
            details.append(f"{pattern} (server '{connection.name}' offers no tools)")
        else:
            why = connection.error or connection.status
            details.append(f"{pattern} (server '{connection.name}' is {connection.status}: {why})")
    return (
        f"Agent '{agent_type}' requires MCP servers matching: {patterns}. "
        f"Missing: {'; '.join(details)}. The agent was not started."
    )
