"""``requiredMcpServers``: which servers satisfy a pattern, how long a spawn waits for one still
connecting, and what the refusal says (docs/mcp.md; the CLI path is in test_mcp_cli.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from subagents.agents.mcp_scope import refusal
from subagents.mcp.config import ConfiguredServer
from subagents.mcp.connection import McpTimeouts, McpToolInfo, ServerConnection, Status
from subagents.mcp.servers import missing_servers, wait_for_required

TOOL = McpToolInfo(name="t", description="", input_schema={"type": "object"}, read_only=False)


def _connection(name: str, status: Status = "connected", *, tools: bool = True) -> ServerConnection:
    server = ConfiguredServer(name=name, entry=None, scope="project", source=".mcp.json")
    connection = ServerConnection(server, cwd=Path("."), timeouts=McpTimeouts())
    connection.status = status  # a test drives the state by hand
    connection.tools = [TOOL] if tools else []
    return connection


def test_a_pattern_matches_a_name_containing_it_and_needs_a_tool() -> None:
    github = _connection("GitHub-Enterprise")
    empty = _connection("db", tools=False)
    broken = _connection("slack", "failed")
    broken.error = "MCP server 'slack' could not connect: boom"

    missing = missing_servers(["github", "DB", "slack", "jira"], [github, empty, broken])

    assert [pattern for pattern, _c in missing] == ["DB", "slack", "jira"]
    text = refusal("needy", missing)
    assert text.startswith("Agent 'needy' requires MCP servers matching: DB, slack, jira.")
    assert "DB (server 'db' offers no tools)" in text
    assert "slack (server 'slack' is failed: MCP server 'slack' could not connect: boom)" in text
    assert "jira (no configured server matches)" in text
    assert text.endswith("The agent was not started.")


async def test_a_spawn_waits_for_a_server_still_connecting() -> None:
    later = _connection("github", "pending")

    async def connect() -> None:
        await asyncio.sleep(0.3)
        later.status = "connected"

    connecting = asyncio.create_task(connect())
    missing = await wait_for_required(["github"], [later], wait_s=10)
    await connecting

    assert missing == []


async def test_the_wait_is_bounded_and_names_the_server_still_pending() -> None:
    stuck = _connection("github", "restarting")

    loop = asyncio.get_running_loop()
    started = loop.time()
    missing = await wait_for_required(["github"], [stuck], wait_s=0.6)

    assert loop.time() - started >= 0.5
    assert missing == [("github", stuck)]
    assert "server 'github' is restarting" in refusal("needy", missing)
