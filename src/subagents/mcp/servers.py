"""The MCP servers of a session, and the extra servers one child brings (``McpScope``).

``McpServers`` starts every configured server concurrently (``start``, once), offers their tools
(``tools``: the same ``McpTool`` objects to every agent, so a fork's request bytes stay the
parent's), reports their status and closes them (``close``). ``open_scope`` gives a child what its
definition's ``mcpServers`` adds: inline entries become connections the child owns (the scope
closes them), names select the session's connections. ``missing_servers`` is the
``requiredMcpServers`` check (see docs/mcp.md).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagents.mcp.config import ConfiguredServer, McpConfig
from subagents.mcp.connection import McpTimeouts, ServerConnection
from subagents.mcp.resource_tools import ListMcpResourcesTool, ReadMcpResourceTool
from subagents.mcp.sdk_bridge import SdkMessenger
from subagents.mcp.tool import McpTool, check_tool, output_chars
from subagents.tools.base import Tool

REQUIRED_WAIT_S = 30.0
"""How long a spawn waits for a required server that is still connecting (Claude Code's)."""
REQUIRED_POLL_S = 0.5

Warn = Callable[[str], None]


def _ignore(_message: str) -> None:
    return None


@dataclass(kw_only=True)
class McpSettings:
    """What every connection of a session shares: timeouts, the result cap, the SDK bridge."""

    timeouts: McpTimeouts = field(default_factory=McpTimeouts)
    max_result_chars: int = 100_000
    sdk: SdkMessenger | None = None
    warn: Warn = _ignore

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, sdk: SdkMessenger | None = None
    ) -> McpSettings:
        env = os.environ if env is None else env
        return cls(timeouts=McpTimeouts.from_env(env), max_result_chars=output_chars(env), sdk=sdk)


@dataclass(kw_only=True)
class ToolSet:
    """Connections and the tools built from them, each tool built once."""

    settings: McpSettings
    _built: dict[ServerConnection, list[Tool[Any]]] = field(default_factory=dict)

    def tools_of(self, connection: ServerConnection) -> list[Tool[Any]]:
        built = self._built.get(connection)
        if built is None:
            built = self._built[connection] = self._build(connection)
        return built

    def _build(self, connection: ServerConnection) -> list[Tool[Any]]:
        tools: list[Tool[Any]] = []
        taken: set[str] = set()
        key = connection.server.key
        for info in connection.tools:
            if "type" not in info.input_schema:
                info = _with_object_type(info)
            problem = check_tool(key, info)
            tool = None if problem else McpTool(connection, key, info, self._chars())
            if tool is not None and tool.name in taken:
                problem = f"its name {tool.name!r} is taken by another tool of the server"
            if problem or tool is None:
                self.settings.warn(
                    f"MCP server {connection.name!r}: tool {info.name!r} left out: {problem}"
                )
                continue
            taken.add(tool.name)
            tools.append(tool)
        return tools

    def _chars(self) -> int:
        return self.settings.max_result_chars


def _with_object_type(info: Any) -> Any:
    from dataclasses import replace

    return replace(info, input_schema={"type": "object", **info.input_schema})


@dataclass(kw_only=True)
class McpServers:
    """The session's servers (see the module docstring)."""

    config: McpConfig
    cwd: Path
    settings: McpSettings = field(default_factory=McpSettings)
    on_spawn: Callable[[int], None] | None = None
    """Records a session-level stdio server's process group (durable, for recovery)."""
    connections: dict[str, ServerConnection] = field(default_factory=dict)
    toolset: ToolSet = field(init=False)
    _start: asyncio.Task[None] | None = None
    _clashes: set[str] = field(default_factory=set)
    """Tool names two servers gave (warned once each)."""

    def __post_init__(self) -> None:
        self.toolset = ToolSet(settings=self.settings)
        for name, server in self.config.servers.items():
            self.connections[name] = self._connection(server, self.on_spawn)

    def _connection(
        self, server: ConfiguredServer, on_spawn: Callable[[int], None] | None
    ) -> ServerConnection:
        return ServerConnection(
            server,
            cwd=self.cwd,
            timeouts=self.settings.timeouts,
            on_spawn=on_spawn,
            sdk=self.settings.sdk,
        )

    async def start(self) -> None:
        """Connect every server (concurrently; once, however often called)."""
        if self._start is None:
            self._start = asyncio.create_task(self._start_all(), name="mcp-start")
        await asyncio.shield(self._start)

    async def _start_all(self) -> None:
        await start_all(self.connections.values(), self.settings.warn)

    def tools(self, connections: Iterable[ServerConnection] | None = None) -> list[Tool[Any]]:
        """The tools of ``connections`` (default: every session server), and the resource tools
        bound to them when there is at least one."""
        chosen = list(self.connections.values() if connections is None else connections)
        live = [c for c in chosen if c.status in ("connected", "restarting")]
        tools: list[Tool[Any]] = []
        owners: dict[str, ServerConnection] = {}
        for connection in live:
            for tool in self.toolset.tools_of(connection):
                # Two servers can give one name (``my.srv`` and ``my_srv`` are both ``my_srv``;
                # ``a__b``'s ``c`` and ``a``'s ``b__c``): a provider refuses tool names that
                # repeat, so every call would fail. The first server keeps the name.
                owner = owners.setdefault(tool.name, connection)
                if owner is connection:
                    tools.append(tool)
                elif tool.name not in self._clashes:
                    self._clashes.add(tool.name)
                    self.settings.warn(
                        f"MCP server {connection.name!r}: tool {tool.name!r} left out: the "
                        f"name is taken by server {owner.name!r}"
                    )
        if live:
            tools += [ListMcpResourcesTool(live), ReadMcpResourceTool(live)]
        return tools

    def statuses(self) -> list[dict[str, str]]:
        """``[{name, status}]`` as Claude Code's init event lists ``mcp_servers``."""
        return [{"name": c.name, "status": _shown(c.status)} for c in self.connections.values()]

    def describe(self) -> list[dict[str, Any]]:
        return [c.describe() for c in self.connections.values()]

    async def close(self) -> None:
        if self._start is not None and not self._start.done():
            self._start.cancel()
            await asyncio.gather(self._start, return_exceptions=True)
        await close_all(self.connections.values())


def _shown(status: str) -> str:
    return "pending" if status == "restarting" else status


async def start_all(connections: Iterable[ServerConnection], warn: Warn) -> None:
    chosen = list(connections)
    await asyncio.gather(*(c.start() for c in chosen))
    for connection in chosen:
        if connection.status == "failed" and connection.server.error is None:
            warn(connection.error or f"MCP server {connection.name!r} failed")


async def close_all(connections: Iterable[ServerConnection]) -> None:
    await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)


# -- one child's servers ------------------------------------------------------------------------


@dataclass(kw_only=True)
class McpScope:
    """The servers a child sees beyond what it inherits: its own (closed with it) and the
    session's servers its definition names."""

    own: list[ServerConnection] = field(default_factory=list)
    named: list[ServerConnection] = field(default_factory=list)
    tools: list[Tool[Any]] = field(default_factory=list)

    @property
    def connections(self) -> list[ServerConnection]:
        return [*self.own, *self.named]

    async def close(self) -> None:
        """Close the child's own servers (the named ones are the session's). Idempotent."""
        own, self.own = self.own, []
        await close_all(own)


async def open_scope(
    entries: Sequence[str | Mapping[str, Any]],
    *,
    session: McpServers | None,
    settings: McpSettings,
    cwd: Path,
    source: str,
    on_spawn: Callable[[int], None] | None,
) -> McpScope:
    """Start a definition's inline servers and look up its named ones (unknown names are a
    warning). On any failure to return, the servers already started are closed."""
    from subagents.mcp.sources import inline_servers

    scope = McpScope()
    own_config = inline_servers(entries, source=source, warn=settings.warn)
    for name in own_config.names:
        connection = session.connections.get(name) if session is not None else None
        if connection is None:
            settings.warn(f"{source}: mcpServers names {name!r}, which is not configured")
        else:
            scope.named.append(connection)
    host = session or McpServers(config=McpConfig(), cwd=cwd, settings=settings)
    scope.own = [host._connection(server, on_spawn) for server in own_config.servers]
    try:
        await start_all(scope.own, settings.warn)
    except BaseException:
        await scope.close()
        raise
    scope.tools = host.tools(scope.connections) if scope.connections else []
    return scope


def missing_servers(
    patterns: Sequence[str], connections: Sequence[ServerConnection]
) -> list[tuple[str, ServerConnection | None]]:
    """The ``requiredMcpServers`` patterns no usable server satisfies, each with the server
    that matched it but is unusable (or None). A server matches when its name contains the
    pattern, case-insensitively; it satisfies it when connected with at least one tool."""
    missing: list[tuple[str, ServerConnection | None]] = []
    for pattern in patterns:
        matching = [c for c in connections if pattern.lower() in c.name.lower()]
        if not any(c.status == "connected" and c.tools for c in matching):
            missing.append((pattern, matching[0] if matching else None))
    return missing


async def wait_for_required(
    patterns: Sequence[str], connections: Sequence[ServerConnection], wait_s: float
) -> list[tuple[str, ServerConnection | None]]:
    """``missing_servers`` once no matching server is still connecting, or ``wait_s`` passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        missing = missing_servers(patterns, connections)
        waiting = any(
            c.pending for p, _c in missing for c in connections if p.lower() in c.name.lower()
        )
        if not waiting or loop.time() >= deadline:
            return missing
        await asyncio.sleep(min(REQUIRED_POLL_S, max(deadline - loop.time(), 0)))
