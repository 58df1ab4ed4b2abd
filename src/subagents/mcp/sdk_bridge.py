"""The transport to a ``claude-agent-sdk`` program's in-process MCP server.

The SDK keeps the server inside its own process and serves it through the headless control
protocol: each JSON-RPC message goes out as a ``control_request`` ``mcp_message
{server_name, message}``, and the answer's ``mcp_response`` is the server's JSON-RPC reply
(a notification's reply is only an acknowledgement). ``sdk_transport`` turns that into the stream
pair the SDK's ``ClientSession`` expects, so an SDK server is one more transport and everything
above it — handshake, tool listing, calls, timeouts — is the same as for any server.

Each request is forwarded in a task of its own: a slow tool does not hold up another call. A
request the channel cannot carry (the program's stdin closed, no answer) is answered locally with a
JSON-RPC error, so the call fails with a reason instead of waiting for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

SdkMessenger = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""Sends one JSON-RPC message to a ``claude-agent-sdk`` in-process server (by name) and returns
its JSON-RPC answer (``cli/control.py`` implements it with an ``mcp_message`` request)."""

_CHANNEL_ERROR = -32000


class ControlRequests(Protocol):
    """The headless protocol's requests to the SDK (``cli/control.ControlChannel``)."""

    async def request(self, subtype: str, wait_s: float | None, **fields: Any) -> dict[str, Any]:
        """Send a ``control_request`` and return the body of its ``control_response``."""
        ...


def control_messenger(channel: ControlRequests, *, wait_s: float | None = None) -> SdkMessenger:
    """An ``SdkMessenger`` over the control channel: one ``mcp_message`` request per JSON-RPC
    message, the answer's ``mcp_response`` as the server's reply. ``wait_s`` bounds one answer
    (None: the MCP client's own call timeout governs, and closing the transport ends the wait)."""

    async def send(server_name: str, message: dict[str, Any]) -> dict[str, Any]:
        fields = {"server_name": server_name, "message": message}
        body = await channel.request("mcp_message", wait_s, **fields)
        answer = body.get("mcp_response")
        if not isinstance(answer, dict):
            raise TypeError(f"the answer to mcp_message for {server_name!r} has no mcp_response")
        return answer

    return send


@asynccontextmanager
async def sdk_transport(server_name: str, send: SdkMessenger) -> AsyncIterator[TransportStreams]:
    import anyio
    from mcp.shared.message import SessionMessage

    to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    to_server, from_session = anyio.create_memory_object_stream[SessionMessage](16)
    forwards: set[asyncio.Task[None]] = set()

    async def pump() -> None:
        async with from_session:
            async for message in from_session:
                task = asyncio.create_task(
                    _forward(server_name, send, message, to_session), name=f"mcp-sdk:{server_name}"
                )
                forwards.add(task)
                task.add_done_callback(forwards.discard)

    pumping = asyncio.create_task(pump(), name=f"mcp-sdk-pump:{server_name}")
    try:
        yield from_server, to_server
    finally:
        pumping.cancel()
        for task in list(forwards):
            task.cancel()
        await asyncio.gather(pumping, *forwards, return_exceptions=True)
        for stream in (to_session, from_server, to_server, from_session):
            with contextlib.suppress(Exception):
                await stream.aclose()


async def _forward(server_name: str, send: SdkMessenger, message: Any, to_session: Any) -> None:
    import mcp_types
    from mcp.shared.message import SessionMessage

    payload: dict[str, Any] = message.message.model_dump(
        mode="json", by_alias=True, exclude_unset=True
    )
    request_id = payload.get("id")
    is_request = request_id is not None and "method" in payload
    try:
        answer = await send(server_name, payload)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if not is_request:
            return
        answer = _error(request_id, f"the SDK's control channel could not carry it: {exc}")
    if not is_request:
        return
    try:
        reply = mcp_types.jsonrpc_message_adapter.validate_python(answer, by_name=False)
    except ValueError as exc:
        reply = mcp_types.jsonrpc_message_adapter.validate_python(
            _error(request_id, f"the SDK server's answer is not JSON-RPC: {exc}"), by_name=False
        )
    with contextlib.suppress(Exception):  # the session is gone: nobody waits for the answer
        await to_session.send(SessionMessage(reply))


def _error(request_id: Any, message: str) -> dict[str, Any]:
    error = {"code": _CHANNEL_ERROR, "message": message}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}
