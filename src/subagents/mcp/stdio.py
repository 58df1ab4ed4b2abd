"""The stdio transport: an MCP server as a subprocess we own, speaking over its stdin/stdout.

The SDK's ``stdio_client`` does the same exchange but hides the process, and the runtime must
know it: the process group is recorded durably as it starts (``on_spawn``), so a SIGKILL of the
runtime cannot orphan it (recovery kills the recorded group), and its exit is watched so a
crash is noticed at once, not at the next call. What is exchanged is the SDK's: one JSON-RPC
message per line, parsed with ``mcp_types.jsonrpc_message_adapter`` into ``SessionMessage`` s on
anyio memory streams, which the SDK's ``ClientSession`` reads and writes.

The server runs in its own process group (``start_new_session``) with the runtime's environment
plus the entry's ``env`` (as Claude Code passes it), in the session's working directory. Its
stderr is not mixed into ours: the last ``STDERR_TAIL`` bytes are kept for error messages. Closing
follows the MCP shutdown order — close stdin, wait, SIGTERM the group, wait, SIGKILL — in a task
of its own that a second cancellation cannot stop halfway.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagents.mcp.entry_models import StdioServer
from subagents.observe import trace_env
from subagents.process_waiter import WaitedProcess, spawn_waited
from subagents.processes import open_pipe_reader

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

MAX_LINE = 32 << 20
"""Longest message line accepted from a server (32 MiB); a longer one ends the connection."""
STDERR_TAIL = 4096
EXIT_GRACE_S = 2.0
"""How long a server has to exit after its stdin closes, and again after SIGTERM."""
_POLL_S = 0.02


@dataclass(kw_only=True)
class ServerProcess:
    """What the connection knows of a running stdio server."""

    pid: int | None = None
    returncode: int | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the server's output ended (it exited, or closed stdout)."""
    problem: str | None = None
    """Why the transport gave up on the server (an over-long line), if it did."""
    _stderr: bytearray = field(default_factory=bytearray)

    def stderr_tail(self) -> str:
        return self._stderr.decode("utf-8", "replace").strip()

    def add_stderr(self, data: bytes) -> None:
        self._stderr += data
        if len(self._stderr) > STDERR_TAIL:
            del self._stderr[: len(self._stderr) - STDERR_TAIL]

    def describe_end(self) -> str:
        """How the server ended, for error messages: exit status, stderr tail."""
        if self.problem is not None:
            what = self.problem
        elif self.returncode is None:
            what = "closed its output"
        elif self.returncode < 0:
            what = f"was killed by signal {-self.returncode}"
        else:
            what = f"exited with status {self.returncode}"
        tail = "\n".join(self.stderr_tail().splitlines()[-5:])[-600:]
        return f"{what}; its last stderr lines: {tail}" if tail else what


@asynccontextmanager
async def stdio_transport(
    entry: StdioServer,
    *,
    cwd: Path,
    process: ServerProcess,
    on_spawn: Callable[[int], None] | None = None,
) -> AsyncIterator[TransportStreams]:
    """Start the server and yield the SDK's stream pair; the server is dead when this exits."""
    import anyio
    from mcp.shared.message import SessionMessage

    proc = await _start(entry, cwd)
    process.pid = proc.pid
    if on_spawn is not None:
        on_spawn(proc.pid)
    to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    tasks = [
        asyncio.create_task(_read_stdout(proc, to_session, process), name=f"mcp-stdout:{proc.pid}"),
        asyncio.create_task(_write_stdin(proc, from_session), name=f"mcp-stdin:{proc.pid}"),
        asyncio.create_task(_read_stderr(proc, process), name=f"mcp-stderr:{proc.pid}"),
    ]
    try:
        yield from_server, to_server
    finally:
        closing = asyncio.create_task(
            _shutdown(proc, process, tasks, (from_server, to_server, to_session, from_session)),
            name=f"mcp-close:{proc.pid}",
        )
        await _shielded(closing)


@dataclass(kw_only=True, eq=False)
class _Server:
    """The server's process and our ends of its three pipes as asyncio streams."""

    waited: WaitedProcess
    stdin: asyncio.StreamWriter
    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader
    transports: list[asyncio.BaseTransport]

    @property
    def pid(self) -> int:
        return self.waited.pid


async def _start(entry: StdioServer, cwd: Path) -> _Server:
    """Start the server in a session and group of its own, waited for without being reaped
    (``process_waiter``): its group is signalled only while its id is still the server's.
    Before, asyncio's subprocess: its child watcher reaped the server at its exit, and the
    SIGKILL of what the server left in its group went by a number already free."""
    pipes = [os.pipe() for _ in range(3)]  # stdin, stdout, stderr: (read end, write end)
    (stdin_read, stdin_write), (out_read, out_write), (err_read, err_write) = pipes
    try:
        waited = spawn_waited(
            (entry.command, *entry.args),
            cwd=cwd,
            env={**os.environ, **trace_env(), **entry.env},  # a traced run's context reaches it
            stdin=stdin_read,
            stdout=out_write,
            stderr=err_write,
            new_session=True,
        )
    except BaseException:
        for fd in (stdin_write, out_read, err_read):
            os.close(fd)
        raise
    finally:
        for fd in (stdin_read, out_write, err_write):
            os.close(fd)  # the server holds its own copies
    transports: list[asyncio.BaseTransport] = []
    left = [out_read, err_read, stdin_write]  # not yet handed to a transport (which closes it)
    try:
        stdout, transport = await open_pipe_reader(left.pop(0), limit=MAX_LINE)
        transports.append(transport)
        stderr, transport = await open_pipe_reader(left.pop(0))
        transports.append(transport)
        stdin = await _pipe_writer(left.pop(0))
        transports.append(stdin.transport)
    except BaseException:
        waited.kill_group()  # unreaped: its group is still its own
        for transport in transports:
            transport.close()
        for fd in left:
            os.close(fd)
        raise
    return _Server(waited=waited, stdin=stdin, stdout=stdout, stderr=stderr, transports=transports)


async def _pipe_writer(write_fd: int) -> asyncio.StreamWriter:
    """An asyncio stream writer (with ``drain``) over our end of the server's stdin."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()),
        os.fdopen(write_fd, "wb", 0),
    )
    return asyncio.StreamWriter(transport, protocol, None, loop)


async def _read_stdout(proc: _Server, to_session: Any, process: ServerProcess) -> None:
    import mcp_types
    from mcp.shared.message import SessionMessage

    try:
        async with to_session:
            while True:
                try:
                    line = await proc.stdout.readline()
                except ValueError:  # a line past MAX_LINE: the stream cannot resync
                    process.problem = f"sent a message line longer than {MAX_LINE} bytes"
                    return
                if not line:
                    return
                if not line.strip():
                    continue
                await to_session.send(_parsed(line, mcp_types, SessionMessage))
    except Exception:  # the session went away: only the exit watch below matters now
        return
    finally:
        await _exited(proc, 1.0)  # for the exit status in messages; a held pipe only costs 1 s
        process.returncode = proc.waited.returncode
        process.ended.set()


_LEADING_ID = re.compile(
    rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")'
)


def _parsed(line: bytes, mcp_types: Any, session_message: Any) -> Any:
    """A line as the session's next item: the message, or the parse error (the SDK logs it).
    An answer that cannot be parsed (nested past the parser's depth, malformed) but names its
    request id first becomes a JSON-RPC parse error for that request, so the call fails now
    with the reason instead of waiting out MCP_TOOL_TIMEOUT; unknown ids are ignored."""
    try:
        return session_message(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        found = _LEADING_ID.match(line[:512])
        if found is None:
            return exc
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        error = {
            "jsonrpc": "2.0",
            "id": json.loads(found.group(1)),
            "error": {
                "code": -32700,
                "message": f"the server's answer could not be parsed: {reason}",
            },
        }
        return session_message(mcp_types.jsonrpc_message_adapter.validate_python(error))


async def _write_stdin(proc: _Server, from_session: Any) -> None:
    try:
        async with from_session:
            async for message in from_session:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                proc.stdin.write(data.encode() + b"\n")
                await proc.stdin.drain()
    except Exception:  # a closed pipe: the server is gone, the stdout side reports it
        return


async def _read_stderr(proc: _Server, process: ServerProcess) -> None:
    with contextlib.suppress(Exception):
        while chunk := await proc.stderr.read(4096):
            process.add_stderr(chunk)


async def _shutdown(
    proc: _Server, process: ServerProcess, tasks: list[asyncio.Task[None]], streams: tuple[Any, ...]
) -> None:
    """MCP's shutdown order, every wait bounded; the group is dead when this returns."""
    waited = proc.waited
    with contextlib.suppress(Exception):
        proc.stdin.close()
    if not await _exited(proc, EXIT_GRACE_S):
        waited.kill_group(signal.SIGTERM)
        if not await _exited(proc, EXIT_GRACE_S):
            waited.kill_group(signal.SIGKILL)
            await _exited(proc, EXIT_GRACE_S)
    # Whatever the server left running in its group, before the reap: the group's id is
    # still the server's until then.
    waited.kill_group(signal.SIGKILL)
    if waited.exited.done():
        waited.reap()
    else:  # stuck in the kernel past its SIGKILL: its waiter reaps it whenever it ends
        waited.abandon()
    process.returncode = waited.returncode
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for transport in proc.transports:
        transport.close()
    for stream in streams:
        with contextlib.suppress(Exception):
            await stream.aclose()
    process.ended.set()


async def _exited(proc: _Server, wait_s: float) -> bool:
    """Whether the server exited within ``wait_s`` (unreaped: ``_shutdown`` reaps it)."""
    done, _ = await asyncio.wait({proc.waited.exited}, timeout=wait_s)
    return bool(done)


async def _shielded(task: asyncio.Task[None]) -> None:
    """Wait for ``task`` even when cancelled meanwhile (then re-raise once it is done)."""
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
