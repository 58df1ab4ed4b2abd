"""Local HTTP servers that speak the Anthropic Messages and OpenAI chat-completions wire protocols.

The real SDKs talk to them over real sockets: HTTP/1.1 with keep-alive, chunked
``text/event-stream`` bodies, JSON error bodies with ``retry-after`` headers, and connections cut
in the middle of a stream. Each test queues the replies it wants, in order; the server records
every request (method, path, headers, parsed JSON body) so tests can assert on what the SDK sent.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from subagents.models._lean import Transport
from subagents.models.anthropic import AnthropicModel
from subagents.models.openai import OpenAIModel


@dataclass(kw_only=True)
class Reply:
    """One scripted response: an SSE stream (``events``) or a plain JSON body."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    events: list[tuple[str | None, Any]] | None = None
    drop_after: int | None = None
    """Cut the connection (no chunked terminator) after this many events."""
    stall: bool = False
    """After the events, send nothing more and wait for the client to hang up."""
    sse: bytes | None = None
    """A recorded stream body, sent as it is (one chunk per SSE record) instead of ``events``."""
    piece: int | None = None
    """With ``sse``: send the body in HTTP chunks of this many bytes, each written and drained
    on its own, so records, lines and CRLFs are split across network reads."""
    text: bytes | None = None
    """A raw body (not JSON), for error responses that are not JSON."""
    raw: list[bytes] | None = None
    """A chunked body's bytes written exactly as given, each piece written and drained on its
    own (hostile framing: size lines, endless records), then nothing more until the client
    hangs up."""
    chunks: list[bytes] | None = None
    """With ``sse`` unset: an SSE body sent as exactly these HTTP chunks (each chunk's data
    as given, none empty), for chunks that do not hold one record each."""


@dataclass(kw_only=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""


class WireServer:
    """A scripted HTTP/1.1 server on 127.0.0.1, random port."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.client_hung_up = asyncio.Event()
        self._scheme = "http"
        self.connections = 0
        """Connections accepted so far (keep-alive reuse shows as fewer than requests)."""
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        if self._scheme == "https":  # the test certificate names localhost
            host = "localhost"
        return f"{self._scheme}://{host}:{port}"

    async def start(self, *, tls: ssl.SSLContext | None = None) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=tls)
        self._scheme = "https" if tls is not None else "http"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            await asyncio.gather(*self._handlers, return_exceptions=True)
            await self._server.wait_closed()

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            while (request := await _read_request(reader)) is not None:
                self.requests.append(request)
                if not self.replies:
                    reply = Reply(
                        status=500,
                        body={"error": {"type": "api_error", "message": "no reply queued"}},
                    )
                else:
                    reply = self.replies.popleft()
                if not await self._send(reply, reader, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._writers.discard(writer)
            if task is not None:
                self._handlers.discard(task)
            writer.close()

    async def _send(
        self, reply: Reply, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Write ``reply``; False when the connection must not be reused."""
        if reply.raw is not None:
            head = {"content-type": "text/event-stream; charset=utf-8", **reply.headers}
            writer.write(_head(reply.status, head) + b"transfer-encoding: chunked\r\n\r\n")
            try:
                for piece in reply.raw:
                    writer.write(piece)
                    await writer.drain()
                while await reader.read(1024):
                    pass
            except ConnectionError:  # the client hung up while we wrote
                pass
            self.client_hung_up.set()
            return False
        if reply.sse is not None or reply.chunks is not None:
            return await self._send_recorded(reply, writer)
        if reply.events is None:
            payload = reply.text if reply.text is not None else json.dumps(reply.body).encode()
            head = _head(reply.status, {"content-type": "application/json", **reply.headers})
            writer.write(head + f"content-length: {len(payload)}\r\n\r\n".encode() + payload)
            await writer.drain()
            return True
        headers = {"content-type": "text/event-stream", "cache-control": "no-cache"}
        writer.write(_head(reply.status, {**headers, **reply.headers}))
        writer.write(b"transfer-encoding: chunked\r\n\r\n")
        for number, (name, data) in enumerate(reply.events):
            if reply.drop_after is not None and number >= reply.drop_after:
                writer.transport.abort()
                return False
            writer.write(_chunk(_sse(name, data)))
            await writer.drain()
        if reply.stall:
            while await reader.read(1024):
                pass
            self.client_hung_up.set()
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _send_recorded(self, reply: Reply, writer: asyncio.StreamWriter) -> bool:
        head = {"content-type": "text/event-stream; charset=utf-8", **reply.headers}
        writer.write(_head(reply.status, head) + b"transfer-encoding: chunked\r\n\r\n")
        if reply.chunks is not None:
            pieces = reply.chunks
        elif reply.piece is not None:
            assert reply.sse is not None
            size = reply.piece
            pieces = [reply.sse[i : i + size] for i in range(0, len(reply.sse), size)]
        else:
            assert reply.sse is not None
            pieces = [record + b"\n\n" for record in reply.sse.split(b"\n\n")[:-1]]
        for piece in pieces:
            writer.write(_chunk(piece))
            await writer.drain()
            if reply.piece is not None:
                await asyncio.sleep(0)  # let the client read each piece apart
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n").encode()


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found"}
_REASONS |= {429: "Too Many Requests", 500: "Internal Server Error", 529: "Overloaded"}


def _sse(name: str | None, data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    prefix = f"event: {name}\n" if name else ""
    return f"{prefix}data: {text}\n\n".encode()


def _chunk(payload: bytes) -> bytes:
    return f"{len(payload):x}\r\n".encode() + payload + b"\r\n"


async def _read_request(reader: asyncio.StreamReader) -> Recorded | None:
    line = await reader.readline()
    if not line.strip():
        return None
    method, path, _version = line.decode().split(" ", 2)
    headers: dict[str, str] = {}
    while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = header.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        raw = await _read_chunked(reader)
    else:
        raw = await reader.readexactly(int(headers.get("content-length", "0")))
    body = json.loads(raw) if raw else None
    return Recorded(method=method, path=path, headers=headers, body=body, raw=raw)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while size := int((await reader.readline()).split(b";")[0], 16):
        parts.append(await reader.readexactly(size))
        await reader.readline()
    await reader.readline()
    return b"".join(parts)


def _pieces(text: str, count: int = 2) -> list[str]:
    """Split text into ``count`` non-empty-ish pieces, the way a stream would deliver it."""
    step = max(1, -(-len(text) // count))
    return [text[i : i + step] for i in range(0, len(text), step)] or [""]


class AnthropicWire:
    """Builds Messages API replies for the server and models pointed at it."""

    def __init__(self, server: WireServer, *, transport: Transport = "lean") -> None:
        self.server = server
        self.transport: Transport = transport
        self.models: list[AnthropicModel] = []

    def model(self, name: str = "claude-test") -> AnthropicModel:
        model = AnthropicModel(
            name, api_key="test-key", base_url=self.server.url, transport=self.transport
        )
        self.models.append(model)
        return model

    def reply(
        self,
        blocks: list[dict[str, Any]],
        *,
        stop_reason: str = "end_turn",
        usage: dict[str, int] | None = None,
        drop_after: int | None = None,
        stall: bool = False,
    ) -> Reply:
        usage = usage or {"input_tokens": 10, "output_tokens": 5}
        start_usage = {k: v for k, v in usage.items() if k != "output_tokens"}
        message = {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {**start_usage, "output_tokens": 1},
        }  # fmt: skip
        events: list[tuple[str | None, Any]] = [
            ("message_start", {"type": "message_start", "message": message}),
            ("ping", {"type": "ping"}),
        ]
        for index, block in enumerate(blocks):
            events += _anthropic_block_events(index, block)
        delta = {"stop_reason": stop_reason, "stop_sequence": None}
        events.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
        events.append(("message_stop", {"type": "message_stop"}))
        return Reply(events=events, drop_after=drop_after, stall=stall)

    def text(self, text: str, **kwargs: Any) -> Reply:
        return self.reply([{"type": "text", "text": text}], **kwargs)

    def error(
        self, status: int, error_type: str, *, headers: dict[str, str] | None = None
    ) -> Reply:
        body = {"type": "error", "error": {"type": error_type, "message": f"{error_type} test"}}
        return Reply(status=status, body=body, headers=headers or {})

    def stream_error(self, error_type: str) -> Reply:
        """A 200 stream that carries an ``error`` event after message_start."""
        reply = self.text("partial")
        error = {"type": "error", "error": {"type": error_type, "message": "mid-stream"}}
        assert reply.events is not None
        reply.events = [reply.events[0], ("error", error)]
        return reply


def _anthropic_block_events(index: int, block: dict[str, Any]) -> list[tuple[str | None, Any]]:
    kind = block["type"]
    if kind == "text":
        start: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    else:
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        raw = block.get("raw_json", json.dumps(block.get("input", {})))
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(raw, 3)]
    events: list[tuple[str | None, Any]] = [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
    ]
    for delta in deltas:
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        )
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


class OpenAIWire:
    """Builds chat.completion.chunk streams for the server and models pointed at it."""

    def __init__(self, server: WireServer, *, transport: Transport = "lean") -> None:
        self.server = server
        self.transport: Transport = transport
        self.models: list[OpenAIModel] = []

    def model(self, name: str = "gpt-test", *, api_key: str | None = "test-key") -> OpenAIModel:
        model = OpenAIModel(
            name, api_key=api_key, base_url=self.server.url + "/v1", transport=self.transport
        )
        self.models.append(model)
        return model

    def reply(
        self,
        *,
        text: str = "",
        tool_calls: list[tuple[str | None, str, str]] | None = None,
        finish_reason: str | None = None,
        usage: dict[str, Any] | None = None,
        drop_after: int | None = None,
    ) -> Reply:
        """``tool_calls``: ``(id, name, arguments_json)``; their argument deltas interleave."""
        calls = tool_calls or []
        chunks: list[dict[str, Any]] = [_oa_chunk({"role": "assistant", "content": ""})]
        chunks += [_oa_chunk({"content": piece}) for piece in _pieces(text) if text]
        for index, (call_id, name, _args) in enumerate(calls):
            head = {"index": index, "type": "function", "function": {"name": name, "arguments": ""}}
            if call_id is not None:
                head["id"] = call_id
            chunks.append(_oa_chunk({"tool_calls": [head]}))
        split = [_pieces(args, 3) for _id, _name, args in calls]
        for step in range(3):
            for index, parts in enumerate(split):
                if step < len(parts):
                    fragment = {"index": index, "function": {"arguments": parts[step]}}
                    chunks.append(_oa_chunk({"tool_calls": [fragment]}))
        finish = finish_reason or ("tool_calls" if calls else "stop")
        chunks.append(_oa_chunk({}, finish_reason=finish))
        usage = usage or {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}
        chunks.append({**_oa_chunk({}), "choices": [], "usage": usage})
        events: list[tuple[str | None, Any]] = [(None, c) for c in chunks]
        events.append((None, "[DONE]"))
        return Reply(events=events, drop_after=drop_after)

    def error(
        self, status: int, error_type: str, *, headers: dict[str, str] | None = None
    ) -> Reply:
        body = {"error": {"type": error_type, "message": f"{error_type} test", "code": None}}
        return Reply(status=status, body=body, headers=headers or {})


def _oa_chunk(delta: dict[str, Any], *, finish_reason: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
    return {
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
        "model": "gpt-test", "choices": [choice],
    }  # fmt: skip
