"""One MCP server connection: an owned task around the SDK's ``Client``, its status, its calls.

The task (``mcp:<server>``) enters ``mcp.Client`` over the server's transport, lists its tools
(every page), marks the connection ``connected`` and waits until it is closed or the transport
ends. Entering and leaving the client happens in that one task, as anyio's task groups require;
calls come from the agents' tool tasks.

* Timeouts: connecting is bounded by ``McpTimeouts.connect_s`` (``MCP_TIMEOUT``), each call by
  ``call_s`` (``MCP_TOOL_TIMEOUT``). A call that times out is an error naming the variable; the
  server keeps running and the next call goes to it.
* Crash: when the transport ends while connected (the process exited, the session broke), calls
  in flight fail with an error naming the server, how it ended and its stderr tail, and the task
  connects again — at most ``MAX_RESTARTS`` times, waits growing by ``RESTART_DELAY_S``. A call
  made meanwhile waits for the reconnection (bounded by ``connect_s``); once the restarts are
  spent the connection is ``failed`` and its tools answer with the reason at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from subagents.mcp.config import ConfiguredServer
from subagents.mcp.entry_models import HttpServer, SdkServer, StdioServer
from subagents.mcp.results import render_result
from subagents.mcp.sdk_bridge import SdkMessenger, sdk_transport
from subagents.mcp.stdio import ServerProcess, stdio_transport
from subagents.tools.base import ToolError, ToolOutput

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client._transport import TransportStreams

Status = Literal["pending", "connected", "restarting", "failed", "closed"]

MAX_RESTARTS = 3
RESTART_DELAY_S = 0.5
_MAX_PAGES = 100
_CRASH_DETAIL_WAIT_S = 0.5


@dataclass(kw_only=True, frozen=True)
class McpTimeouts:
    """How long to wait for a server to connect, and for one call."""

    connect_s: float = 30.0
    call_s: float = 600.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> McpTimeouts:
        env = os.environ if env is None else env
        return cls(
            connect_s=_ms(env, "MCP_TIMEOUT", cls.connect_s),
            call_s=_ms(env, "MCP_TOOL_TIMEOUT", cls.call_s),
        )


def _ms(env: Mapping[str, str], name: str, default_s: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default_s
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not a number of ms") from None
    return max(value, 1) / 1000


async def load_sdk() -> None:
    """Import the SDK's client parts once, in a thread, before any connect timer runs.

    Importing them takes over a second of CPU, and ten seconds of wall time on a loaded
    machine: on the event loop it would stall every agent, and under the timer it would use up
    ``MCP_TIMEOUT`` before the server is even started."""
    if "mcp.client.streamable_http" not in sys.modules:
        await asyncio.to_thread(_import_sdk)


_SDK_MODULES = (
    "mcp",
    "mcp.client.streamable_http",
    "mcp.client.sse",
    "mcp.shared.message",
    "jsonschema.validators",  # McpTool compiles each server's schema with it
)


def _import_sdk() -> None:
    for name in _SDK_MODULES:
        importlib.import_module(name)


@dataclass(kw_only=True, frozen=True)
class McpToolInfo:
    """One tool as the server listed it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool
    title: str | None = None


class ServerConnection:
    """A server's connection, status and tools (see the module docstring)."""

    def __init__(
        self,
        server: ConfiguredServer,
        *,
        cwd: Path,
        timeouts: McpTimeouts,
        on_spawn: Callable[[int], None] | None = None,
        sdk: SdkMessenger | None = None,
    ) -> None:
        self.server = server
        self.cwd = cwd
        self.timeouts = timeouts
        self.on_spawn = on_spawn
        self.sdk = sdk
        self.status: Status = "pending"
        self.error: str | None = server.error
        self.tools: list[McpToolInfo] = []
        self.has_resources = False
        self.restarts = 0
        self._client: Client | None = None
        self._process: ServerProcess | None = None
        self._lost = asyncio.Event()
        self._stop = asyncio.Event()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connected_once = False
        self._timed_out = False
        self._timer: asyncio.TimerHandle | None = None

    @property
    def name(self) -> str:
        return self.server.name

    @property
    def pending(self) -> bool:
        """Still connecting or reconnecting: may yet become usable."""
        return self.status in ("pending", "restarting")

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect (bounded by ``connect_s``); afterwards ``status`` is connected or failed."""
        if self._task is None:
            if self.server.entry is None:
                self._set("failed", self.server.error or "unusable configuration")
                return
            await load_sdk()
            self._task = asyncio.create_task(self._serve(), name=f"mcp:{self.name}")
        await self.wait_settled(self.timeouts.connect_s + 1)

    async def wait_settled(self, wait_s: float) -> None:
        """Wait (at most ``wait_s``) until the connection is not pending any more."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while self.pending and self._task is not None and not self._task.done():
            self._changed.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._changed.wait()

    async def close(self) -> None:
        """Stop the server; its process is dead when this returns. Safe to call twice."""
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            if not self._client:
                task.cancel()  # still connecting: nothing to wind down gracefully
            await asyncio.gather(task, return_exceptions=True)
        if self.status != "failed":
            self._set("closed", self.error)

    def _set(self, status: Status, error: str | None = None) -> None:
        self.status = status
        self.error = error
        self._changed.set()

    async def _serve(self) -> None:
        while not self._stop.is_set():
            reason = await self._attempt()
            if self._stop.is_set():
                return
            if not self._connected_once:
                self._set("failed", f"MCP server '{self.name}' could not connect: {reason}")
                return
            if self.restarts >= MAX_RESTARTS:
                self._set(
                    "failed",
                    f"MCP server '{self.name}' stopped {self.restarts + 1} times and is not "
                    f"restarted again; last: {reason}",
                )
                return
            self.restarts += 1
            self._set("restarting", f"MCP server '{self.name}' stopped ({reason}); restarting")
            await asyncio.sleep(RESTART_DELAY_S * self.restarts)

    async def _attempt(self) -> str:
        """One connection, from connecting to its end; returns how it ended.

        Connecting is bounded by a timer that cancels this task: a timeout scope around
        entering the client cannot be used, as the client's own scopes outlive it."""
        task = asyncio.current_task()
        assert task is not None
        timer = self._timer = asyncio.get_running_loop().call_later(
            self.timeouts.connect_s, self._connect_timed_out, task
        )
        try:
            await self._session_once()
            return self._end_reason()
        except asyncio.CancelledError:
            if not self._timed_out:
                raise
            task.uncancel()
            self._timed_out = False
            ms = int(self.timeouts.connect_s * 1000)
            return f"did not connect within {ms} ms (MCP_TIMEOUT)"
        except Exception as exc:  # anyio wraps transport failures in groups
            return describe_failure(exc, self._process)
        finally:
            timer.cancel()

    def _connect_timed_out(self, task: asyncio.Task[Any]) -> None:
        if self._client is None and not task.done():
            self._timed_out = True
            task.cancel()

    async def _session_once(self) -> None:
        from importlib.metadata import version

        from mcp import Client, Implementation

        self._lost = asyncio.Event()
        self._process = ServerProcess() if isinstance(self.server.entry, StdioServer) else None
        async with AsyncExitStack() as stack:
            client = Client(
                self._transport(),
                client_info=Implementation(name="subagents", version=version("subagents")),
                cache=None,
            )
            await stack.enter_async_context(client)
            self.tools = await _list_tools(client)
            capabilities = client.server_capabilities
            self.has_resources = capabilities.resources is not None
            self._client = client
            if self._timer is not None:
                self._timer.cancel()
            self._connected_once = True
            self._set("connected")
            try:
                await _first(self._stop, self._lost, *self._ended())
            finally:
                self._client = None

    def _ended(self) -> list[asyncio.Event]:
        return [self._process.ended] if self._process is not None else []

    def _end_reason(self) -> str:
        if self._process is not None and self._process.ended.is_set():
            return self._process.describe_end()
        return "the connection closed"

    def _transport(self) -> AbstractAsyncContextManager[TransportStreams]:
        entry = self.server.entry
        if isinstance(entry, StdioServer):
            assert self._process is not None
            return stdio_transport(
                entry, cwd=self.cwd, process=self._process, on_spawn=self.on_spawn
            )
        if isinstance(entry, HttpServer):
            return _http_transport(entry)
        if isinstance(entry, SdkServer):
            if self.sdk is None:
                raise ToolError(
                    "an `sdk` server needs the control channel of a claude-agent-sdk program "
                    "(--input-format stream-json)"
                )
            return sdk_transport(entry.name or self.name, self.sdk)
        raise ToolError(self.server.error or "unusable configuration")

    # -- calls -------------------------------------------------------------------------------

    async def call_tool(self, tool: str, arguments: dict[str, Any], *, display: str) -> ToolOutput:
        """Call ``tool``; every failure is a ``ToolError`` naming the server and the tool."""
        client = await self._usable(display)
        try:
            result = await client.call_tool(
                tool, arguments, read_timeout_seconds=self.timeouts.call_s
            )
        except Exception as exc:
            raise await self._call_error(exc, display) from None
        return render_result(result, server=self.name, tool=tool)

    async def list_resources(self) -> list[dict[str, Any]]:
        client = await self._usable("ListMcpResources")
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        try:
            for _ in range(_MAX_PAGES):
                page = await client.list_resources(cursor=cursor)
                found += [_dumped(resource) for resource in page.resources]
                cursor = page.next_cursor
                if cursor is None:
                    break
        except Exception as exc:
            raise await self._call_error(exc, "ListMcpResources") from None
        return found

    async def read_resource(self, uri: str) -> list[dict[str, Any]]:
        client = await self._usable("ReadMcpResource")
        try:
            result = await client.read_resource(uri)
        except Exception as exc:
            raise await self._call_error(exc, "ReadMcpResource") from None
        return [_dumped(content) for content in result.contents]

    async def _usable(self, display: str) -> Client:
        """The live client; waits (bounded) while the server connects or reconnects."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeouts.connect_s
        while self._broken() and self.status in ("pending", "restarting", "connected"):
            self._changed.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(remaining, _CRASH_DETAIL_WAIT_S)):
                    await self._changed.wait()
        client = self._client
        if client is None or self._broken():
            why = self.error or f"MCP server '{self.name}' is {self.status}"
            raise ToolError(f"{display} is unavailable: {why}")
        return client

    def _broken(self) -> bool:
        """Not (or no longer) usable: not connected, or its transport has ended."""
        if self.status != "connected" or self._client is None:
            return True
        process = self._process
        return self._lost.is_set() or (process is not None and process.ended.is_set())

    async def _call_error(self, exc: Exception, display: str) -> ToolError:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        if isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT:
            ms = int(self.timeouts.call_s * 1000)
            return ToolError(
                f"{display} timed out after {ms} ms (MCP_TOOL_TIMEOUT): MCP server "
                f"'{self.name}' did not answer. The server is still running; the call may "
                "still have effects."
            )
        if isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED:
            return ToolError(f"MCP server '{self.name}' answered {display} with an error: {exc}")
        self._lost.set()
        process = self._process
        if process is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_CRASH_DETAIL_WAIT_S):
                    await process.ended.wait()
        how = process.describe_end() if process is not None else describe_failure(exc, None)
        left = MAX_RESTARTS - self.restarts
        then = (
            f"It is being restarted ({self.restarts + 1} of {MAX_RESTARTS}); call the tool "
            "again if repeating it is safe."
            if left > 0
            else "It is not restarted again."
        )
        return ToolError(f"MCP server '{self.name}' stopped during {display}: {how}. {then}")

    def describe(self) -> dict[str, Any]:
        """Name, status and tools, for ``subagents mcp list`` and the init event."""
        return {
            "name": self.name,
            "scope": self.server.scope,
            "source": self.server.source,
            "transport": self.server.transport,
            "status": self.status,
            "error": self.error,
            "tools": [{"name": t.name, "readOnly": t.read_only} for t in self.tools],
        }


def _dumped(model: Any) -> dict[str, Any]:
    """An SDK object as the JSON the server sent (camelCase keys, no nulls)."""
    data: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data


async def _list_tools(client: Client) -> list[McpToolInfo]:
    tools: list[McpToolInfo] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        for tool in page.tools:
            annotations = tool.annotations
            tools.append(
                McpToolInfo(
                    name=tool.name,
                    description=tool.description or "",
                    input_schema=dict(tool.input_schema),
                    read_only=bool(annotations is not None and annotations.read_only_hint),
                    title=tool.title,
                )
            )
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


async def _first(*events: asyncio.Event) -> None:
    """Return when any of ``events`` is set."""
    waiters = [asyncio.create_task(e.wait(), name="mcp-wait") for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)


@asynccontextmanager
async def _http_transport(entry: HttpServer) -> AsyncIterator[TransportStreams]:
    """Streamable HTTP or SSE with the entry's headers (an ``httpx2`` client we own)."""
    import httpx2

    if entry.type == "sse":
        from mcp.client.sse import sse_client

        async with sse_client(entry.url, headers=entry.headers) as streams:
            yield streams
        return
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=entry.headers, timeout=timeout) as http,
        streamable_http_client(entry.url, http_client=http) as streams,
    ):
        yield streams


def describe_failure(exc: BaseException, process: ServerProcess | None) -> str:
    """One line for why a connection failed: the innermost real error, and the stderr tail."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        text = "timed out (MCP_TIMEOUT)"
    elif isinstance(exc, FileNotFoundError):
        text = f"cannot start it: {exc.strerror or 'no such file'}: {exc.filename}"
    elif isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.strerror}"
    else:
        text = str(exc) or type(exc).__name__
    if process is not None and (process.ended.is_set() or process.stderr_tail()):
        text = f"{text}; the server {process.describe_end()}"
    return text
