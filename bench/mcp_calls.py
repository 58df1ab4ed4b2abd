"""MCP: what a server costs to start, and what one tool call costs on our side.

The demo server of the tests (written with the ``mcp`` SDK) is reached the way an agent reaches
it — ``ServerConnection`` over our stdio transport — and called ``--calls`` times, one call after
another, with a short ``echo``. Reported:

* ``import_s`` — importing the SDK's client modules (``connection.load_sdk``, in a thread);
* ``connect_s`` — spawning the server until its tools are listed (its own interpreter start and
  SDK import included: the floor is ``python -c 'import mcp'``);
* ``call_us`` — wall time per call (our side, the pipe and the server together);
* ``cpu_us`` — CPU time of *our* process per call: the figure to compare on a busy machine;
* ``tool_us`` — the same calls through ``McpTool.call`` (schema validation by jsonschema, result
  rendering), CPU per call.

Run: ``python bench/mcp_calls.py [--calls 500]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.mcp.config import ConfiguredServer
from subagents.mcp.connection import McpTimeouts, ServerConnection, load_sdk
from subagents.mcp.entry_models import StdioServer
from subagents.mcp.tool import McpArguments, McpTool
from subagents.tools.base import CallInfo, ToolContext

DEMO = Path(__file__).resolve().parent.parent / "tests" / "mcp_fixtures" / "demo_server.py"


async def measure(calls: int) -> dict[str, float]:
    started = time.perf_counter()
    await load_sdk()
    imported = time.perf_counter()
    entry = StdioServer(command=sys.executable, args=[str(DEMO)])
    server = ConfiguredServer(name="demo", entry=entry, scope="cli", source="bench")
    connection = ServerConnection(server, cwd=Path.cwd(), timeouts=McpTimeouts(connect_s=120))
    await connection.start()
    connected = time.perf_counter()
    try:
        assert connection.status == "connected", connection.error
        wall, cpu = await _calls(connection, calls)
        tool_cpu = await _tool_calls(connection, calls)
    finally:
        await connection.close()
    return {
        "import_s": imported - started,
        "connect_s": connected - imported,
        "call_us": wall / calls * 1e6,
        "cpu_us": cpu / calls * 1e6,
        "tool_us": tool_cpu / calls * 1e6,
    }


async def _calls(connection: ServerConnection, calls: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await connection.call_tool("echo", {"text": "x"}, display="mcp__demo__echo")
    return time.perf_counter() - wall, time.process_time() - cpu


async def _tool_calls(connection: ServerConnection, calls: int) -> float:
    info = next(t for t in connection.tools if t.name == "echo")
    tool = McpTool(connection, "demo", info, 100_000)
    ctx = ToolContext(
        cwd=Path.cwd(),
        roots=(Path.cwd(),),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="bench", agent_type="main"),
    )
    cpu = time.process_time()
    for index in range(calls):
        args = tool.parse_input({"text": "x", "times": 1})
        assert isinstance(args, McpArguments)
        await tool.call(args, ctx, CallInfo(tool_use_id=f"t{index}", progress=_ignore))
    return time.process_time() - cpu


def _ignore(_update: dict[str, Any]) -> None:
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=500)
    figures = asyncio.run(measure(parser.parse_args().calls))
    for name, value in figures.items():
        print(f"{name:>10}: {value:,.3f}" if name.endswith("_s") else f"{name:>10}: {value:,.0f}")


if __name__ == "__main__":
    main()
