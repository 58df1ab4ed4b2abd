"""SDK in-process servers as one more transport: the SDK's ``ClientSession`` speaks JSON-RPC
through ``mcp_message`` control requests (``mcp/sdk_bridge.py``).

The first test's channel answers as claude-agent-sdk's own side does: its ``SdkMcpBridge`` in
front of a server made with its ``create_sdk_mcp_server`` and ``@tool`` (what its ``Query``
runs for an ``mcp_message`` request, with the acknowledgement it sends for a notification).
The others use a hand-written router for what the real one does not do on demand (docs/mcp.md).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from claude_agent_sdk import create_sdk_mcp_server, tool
from claude_agent_sdk._internal.sdk_mcp_bridge import SdkMcpBridge

from subagents.mcp.config import ConfiguredServer
from subagents.mcp.connection import McpTimeouts, ServerConnection
from subagents.mcp.entry_models import SdkServer
from subagents.mcp.sdk_bridge import control_messenger

GREET = {
    "name": "greet",
    "description": "Greet someone.",
    "inputSchema": {"type": "object", "properties": {"who": {"type": "string"}}},
}


class SdkChannel:
    """A control channel whose other side is an SDK program serving one in-process server."""

    def __init__(self, *, slow_s: float = 0.0) -> None:
        self.sent: list[tuple[str, str, dict[str, Any]]] = []
        self.slow_s = slow_s

    async def request(self, subtype: str, wait_s: float | None, **fields: Any) -> dict[str, Any]:
        message = fields["message"]
        self.sent.append((subtype, fields["server_name"], message))
        method, params = message.get("method"), message.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": fields["server_name"], "version": "1.0.0"},
            }
        elif method == "tools/list":
            result = {"tools": [GREET]}
        elif method == "tools/call":
            who = params["arguments"]["who"]
            if who == "slow":
                await asyncio.sleep(self.slow_s)
            result = {"content": [{"type": "text", "text": f"hello {who}"}]}
        elif method is None or method.startswith("notifications/"):
            result = {}
        else:  # server/discover among them: the client falls back to initialize
            error = {"code": -32601, "message": f"Method '{method}' not found"}
            return {"mcp_response": {"jsonrpc": "2.0", "id": message.get("id"), "error": error}}
        return {"mcp_response": {"jsonrpc": "2.0", "id": message.get("id"), "result": result}}


class ClaudeSdkChannel:
    """The control channel with claude-agent-sdk's own in-process server behind it."""

    def __init__(self, bridges: dict[str, SdkMcpBridge]) -> None:
        self.bridges = bridges
        self.methods: list[str | None] = []

    async def request(self, subtype: str, wait_s: float | None, **fields: Any) -> dict[str, Any]:
        assert subtype == "mcp_message"
        self.methods.append(fields["message"].get("method"))
        answer = await self.bridges[fields["server_name"]].handle(fields["message"])
        return {"mcp_response": answer or {"jsonrpc": "2.0", "result": {}}}


async def test_claude_agent_sdks_own_in_process_server_answers_through_the_bridge() -> None:
    @tool("add", "Add two numbers.", {"a": int, "b": int})
    async def add(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": str(args["a"] + args["b"])}]}

    config = create_sdk_mcp_server("calc", tools=[add])
    bridge = SdkMcpBridge("calc", config["instance"])
    channel = ClaudeSdkChannel({"calc": bridge})
    entry = SdkServer(type="sdk", name="calc")
    server = ConfiguredServer(name="calc", entry=entry, scope="cli", source="--mcp-config")
    connection = ServerConnection(
        server, cwd=Path("."), timeouts=McpTimeouts(connect_s=30), sdk=control_messenger(channel)
    )
    try:
        await connection.start()
        assert connection.status == "connected", connection.error
        assert [t.name for t in connection.tools] == ["add"]
        assert connection.tools[0].input_schema["properties"]["a"]["type"] == "integer"
        output = await connection.call_tool("add", {"a": 2, "b": 40}, display="mcp__calc__add")
        assert output.content == "42" and not output.is_error
    finally:
        await connection.close()
        await bridge.aclose()
    assert "tools/call" in channel.methods


def _connection(channel: SdkChannel, call_s: float = 30.0) -> ServerConnection:
    entry = SdkServer(type="sdk", name="tools")
    server = ConfiguredServer(name="tools", entry=entry, scope="cli", source="--mcp-config")
    timeouts = McpTimeouts(connect_s=10, call_s=call_s)
    return ServerConnection(
        server, cwd=Path("."), timeouts=timeouts, sdk=control_messenger(channel)
    )


async def test_an_sdk_server_connects_lists_and_answers_calls_through_mcp_message() -> None:
    channel = SdkChannel(slow_s=0.5)
    connection = _connection(channel)
    await connection.start()
    try:
        assert connection.status == "connected", connection.error
        assert [t.name for t in connection.tools] == ["greet"]
        slow = asyncio.create_task(connection.call_tool("greet", {"who": "slow"}, display="g"))
        fast = await connection.call_tool("greet", {"who": "fast"}, display="g")
        assert fast.content == "hello fast"  # not held up by the slow call before it
        assert not slow.done()
        assert (await slow).content == "hello slow"
    finally:
        await connection.close()
    methods = [m.get("method") for subtype, name, m in channel.sent]
    assert {subtype for subtype, _n, _m in channel.sent} == {"mcp_message"}
    assert {name for _s, name, _m in channel.sent} == {"tools"}
    handshake = methods[methods.index("initialize") :][:3]
    assert handshake == ["initialize", "notifications/initialized", "tools/list"]


async def test_without_a_control_channel_an_sdk_server_fails_with_the_reason() -> None:
    entry = SdkServer(type="sdk", name="tools")
    server = ConfiguredServer(name="tools", entry=entry, scope="cli", source="--mcp-config")
    connection = ServerConnection(server, cwd=Path("."), timeouts=McpTimeouts(connect_s=5))
    await connection.start()
    await connection.close()
    assert connection.status == "failed"
    assert "needs the control channel of a claude-agent-sdk program" in (connection.error or "")


async def test_an_answer_without_mcp_response_fails_the_call_not_the_session() -> None:
    class Broken(SdkChannel):
        async def request(
            self, subtype: str, wait_s: float | None, **fields: Any
        ) -> dict[str, Any]:
            if fields["message"].get("method") == "tools/call":
                return {"unexpected": True}
            return await super().request(subtype, wait_s, **fields)

    connection = _connection(Broken())
    await connection.start()
    try:
        assert connection.status == "connected", connection.error
        try:
            await connection.call_tool("greet", {"who": "x"}, display="mcp__tools__greet")
        except Exception as exc:
            assert "no mcp_response" in str(exc)
        else:
            raise AssertionError("the call should fail")
        assert connection.status == "connected"
    finally:
        await connection.close()
