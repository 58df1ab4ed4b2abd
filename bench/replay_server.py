"""A local model server for the HTTP benchmarks: it replays recorded Messages API and
chat-completions streams over HTTP/1.1 on 127.0.0.1.

The streams in ``bench/recorded/`` are byte-for-byte what the two APIs send (every event type,
pings, usage with cache counters, ``[DONE]``). A reply is built from them: the recorded text
block as it is, the recorded tool-use block with the tool name, id and input the scenario needs
(the input's JSON split into as many deltas as the recording has), the recorded usage and stop
events. Replies are encoded once per (protocol, role, turn) and cached, so the server spends
little CPU of the two cores the client is measured on.

Scenario (the bench's fan-out): a request whose tools include ``Agent`` is the coordinator — on
its first turn it gets N ``Agent`` calls (``subagent_type: worker``), then a text answer; any
other request is a worker — K-1 turns of one ``Note`` call, then a text answer. The turn is the
number of assistant messages in the request's history. Every reply waits ``latency`` seconds
before its first byte (the model's time to first token), then streams all its events.

``watch(pid)``: for each request, record the CPU the process ``pid`` had used when the
request's head arrived (all threads, from ``/proc/PID/task/*/schedstat``, in ns), which is the
start-up bench's "CPU to the first model request".

Run alone: ``python bench/replay_server.py [--n 50 --k 10 --latency-ms 20]`` prints its URL on
the first line and serves until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).resolve().parent / "recorded"
Event = tuple[str | None, Any]


def load_recording(name: str) -> list[Event]:
    """The events of a recorded stream: ``(event name or None, parsed data)``."""
    events: list[Event] = []
    for record in (RECORDED / name).read_text().split("\n\n"):
        if not record.strip():
            continue
        event_name: str | None = None
        data = ""
        for line in record.split("\n"):
            if line.startswith("event: "):
                event_name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        events.append((event_name, data if data == "[DONE]" else json.loads(data)))
    return events


def encode(events: list[Event]) -> list[bytes]:
    """SSE records as the APIs write them (compact JSON), one HTTP chunk each."""
    out: list[bytes] = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        record = (f"event: {name}\n" if name else "") + f"data: {text}\n\n"
        payload = record.encode()
        out.append(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
    return out


def split_json(value: dict[str, Any], parts: int) -> list[str]:
    text = json.dumps(value)
    step = max(1, -(-len(text) // parts))
    return [text[i : i + step] for i in range(0, len(text), step)]


@dataclass(kw_only=True)
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]


class AnthropicReplay:
    """Messages API streams assembled from the recorded text and tool-use streams."""

    def __init__(self) -> None:
        tool = load_recording("anthropic_tool_use.sse")
        self.text_events = load_recording("anthropic_text.sse")
        first_tool = next(i for i, event in enumerate(tool) if _block_index(event) == 1)
        self.head = tool[:first_tool]
        self.tool_block = [e for e in tool if _block_index(e) == 1]
        self.tail = tool[-2:]

    def reply(self, calls: list[ToolCall], text: str | None) -> list[Event]:
        if not calls:
            return self.text_events
        events = list(self.head)
        for number, call in enumerate(calls, start=1):
            events += self._tool_events(number, call)
        return [*events, *self.tail]

    def _tool_events(self, index: int, call: ToolCall) -> list[Event]:
        deltas = [e for e in self.tool_block if e[1]["type"] == "content_block_delta"]
        pieces = ["", *split_json(call.input, len(deltas) - 1)]
        start = json.loads(json.dumps(self.tool_block[0][1]))
        start["index"] = index
        start["content_block"].update(id=call.id, name=call.name)
        out: list[Event] = [("content_block_start", start)]
        for piece in pieces:
            delta = {"type": "input_json_delta", "partial_json": piece}
            out.append(("content_block_delta", {**deltas[0][1], "index": index, "delta": delta}))
        out.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        return out


def _block_index(event: Event) -> int | None:
    data = event[1]
    return data.get("index") if isinstance(data, dict) else None


class OpenAIReplay:
    """chat.completion.chunk streams assembled from the recorded text and tool-call streams."""

    def __init__(self) -> None:
        self.text_events = load_recording("openai_text.sse")
        tool = load_recording("openai_tool_call.sse")
        self.head = [e for e in tool if not _tool_calls(e)][:-3]
        self.calls = [e for e in tool if _tool_calls(e)]
        self.tail = tool[-3:]

    def reply(self, calls: list[ToolCall], text: str | None) -> list[Event]:
        if not calls:
            return self.text_events
        events = list(self.head)
        for index, call in enumerate(calls):
            events += self._call_events(index, call)
        return [*events, *self.tail]

    def _call_events(self, index: int, call: ToolCall) -> list[Event]:
        first = json.loads(json.dumps(self.calls[0][1]))
        head = first["choices"][0]["delta"]["tool_calls"][0]
        head.update(index=index, id=call.id)
        head["function"]["name"] = call.name
        out: list[Event] = [(None, first)]
        for piece in split_json(call.input, len(self.calls) - 1):
            chunk = json.loads(json.dumps(self.calls[1][1]))
            fragment = chunk["choices"][0]["delta"]["tool_calls"][0]
            fragment["index"] = index
            fragment["function"]["arguments"] = piece
            out.append((None, chunk))
        return out


def _tool_calls(event: Event) -> bool:
    data = event[1]
    if not isinstance(data, dict) or not data.get("choices"):
        return False
    return bool(data["choices"][0]["delta"].get("tool_calls"))


@dataclass(kw_only=True)
class FanoutScenario:
    """Which reply a request gets (see the module docstring)."""

    n: int = 50
    k: int = 10

    def calls(self, tool_names: list[str], turn: int) -> list[ToolCall]:
        if "Agent" in tool_names:
            if turn > 0:
                return []
            return [
                ToolCall(
                    id=f"toolu_bench_agent_{i:03d}",
                    name="Agent",
                    input={
                        "description": f"job {i}",
                        "prompt": f"job {i}",
                        "subagent_type": "worker",
                    },
                )
                for i in range(self.n)
            ]
        if turn >= self.k - 1:
            return []
        return [
            ToolCall(id=f"toolu_bench_note_{turn:03d}", name="Note", input={"text": f"step {turn}"})
        ]


@dataclass(kw_only=True)
class Arrival:
    path: str
    at: float
    """``time.monotonic()`` when the request's head arrived."""
    client_cpu_ns: int | None
    """CPU the watched process had used by then (None when no process is watched)."""


@dataclass(kw_only=True)
class ReplayServer:
    scenario: FanoutScenario = field(default_factory=FanoutScenario)
    latency_s: float = 0.0
    arrivals: list[Arrival] = field(default_factory=list)
    watched_pid: int | None = None
    record: Path | None = None
    """Append every request body to this file, one per line (the floors replay them)."""
    streams: bool = False
    """Serve with asyncio streams (a reader/writer and a task per connection, a sleep per
    reply) instead of the default protocol (``_ReplayProtocol``: a buffer per connection, a
    timer per reply); the same bytes either way, the streams cost the server about twice the
    CPU per call (89-99 vs 40-48 µs at L = 0, measured under load: docs/performance.md)."""
    _server: asyncio.Server | None = None
    _cache: dict[tuple[str, bool, int], list[bytes]] = field(default_factory=dict)
    _anthropic: AnthropicReplay = field(default_factory=AnthropicReplay)
    _openai: OpenAIReplay = field(default_factory=OpenAIReplay)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def start(self, port: int = 0) -> None:
        if self.streams:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", port, backlog=512)
            return
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _ReplayProtocol(self), "127.0.0.1", port, backlog=512
        )

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def watch(self, pid: int | None) -> None:
        self.watched_pid = pid

    def arrived(self, head: bytes) -> tuple[str, int]:
        """A request's head is in: note it (and the watched CPU); its path and body length."""
        arrived = time.monotonic()
        cpu = process_cpu_ns(self.watched_pid) if self.watched_pid else None
        path, length = _parse_head(head)
        self.arrivals.append(Arrival(path=path, at=arrived, client_cpu_ns=cpu))
        return path, length

    def response(self, path: str, raw: bytes) -> bytes:
        """The whole HTTP response to one request (head, one chunk per SSE event, last chunk)."""
        if self.record is not None:
            with self.record.open("ab") as handle:
                handle.write(raw + b"\n")
        return _STREAM_HEAD + b"".join(self._reply(path, raw)) + b"0\r\n\r\n"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path, length = self.arrived(head)
                raw = await reader.readexactly(length) if length else b"{}"
                if self.record is not None:
                    with self.record.open("ab") as handle:
                        handle.write(raw + b"\n")
                chunks = self._reply(path, raw)
                if self.latency_s:
                    await asyncio.sleep(self.latency_s)
                writer.write(_STREAM_HEAD)
                writer.writelines(chunks)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _reply(self, path: str, raw: bytes) -> list[bytes]:
        openai = path.endswith("/chat/completions")
        # Both clients send compact JSON; counting bytes instead of parsing the whole history
        # keeps the server's CPU per request small (it shares the machine with the client).
        turn = raw.count(b'"role":"assistant"')
        coordinator = b'"name":"Agent"' in raw
        key = (path, coordinator, turn)
        cached = self._cache.get(key)
        if cached is None:
            body = json.loads(raw)
            if openai:
                names = [t["function"]["name"] for t in body.get("tools", [])]
            else:
                names = [t["name"] for t in body.get("tools", [])]
            calls = self.scenario.calls(names, turn)
            replay = self._openai if openai else self._anthropic
            cached = self._cache[key] = encode(replay.reply(calls, None))
        return cached


class _ReplayProtocol(asyncio.Protocol):
    """One keep-alive connection: requests parsed from a buffer as they complete, each reply
    written whole after the latency by a timer (replies of one connection keep their order:
    equal delays fire in the order they were set)."""

    def __init__(self, server: ReplayServer) -> None:
        self.server = server
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = bytes(self.buffer[: end + 4])
            path, length = _parse_head(head)
            if len(self.buffer) < end + 4 + length:
                return  # the body is not all here yet; the head is parsed again then
            raw = bytes(self.buffer[end + 4 : end + 4 + length]) if length else b"{}"
            del self.buffer[: end + 4 + length]
            self.server.arrived(head)
            payload = self.server.response(path, raw)
            if self.server.latency_s:
                self.loop.call_later(self.server.latency_s, self._send, payload)
            else:
                self._send(payload)

    def _send(self, payload: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(payload)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-cache\r\nrequest-id: req_011CbenchReplay\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


def _parse_head(head: bytes) -> tuple[str, int]:
    lines = head.decode("latin-1").split("\r\n")
    path = lines[0].split(" ")[1]
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return path, length


def process_cpu_ns(pid: int) -> int | None:
    """CPU time (user + system, all threads) the process has used, in ns; None once it is gone."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as handle:
                total += int(handle.read().split()[0])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return total


async def _serve_forever(args: argparse.Namespace) -> None:
    server = ReplayServer(
        scenario=FanoutScenario(n=args.n, k=args.k),
        latency_s=args.latency_ms / 1000,
        record=args.record,
        streams=args.streams,
    )
    await server.start(args.port)
    print(server.url, flush=True)
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--record", type=Path, help="append request bodies to this file")
    parser.add_argument(
        "--streams", action="store_true", help="serve with asyncio streams (the old server)"
    )
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve_forever(args))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
