"""A hostile or broken server cannot make the lean client buffer without end.

Two bounds, each through a provider's ``complete`` over a real HTTP server on 127.0.0.1: a
chunk size line announcing more than ``_http.MAX_CHUNK_BYTES`` (the chunk would be held whole
until it had all come), and an SSE record that never ends past ``_sse.MAX_RECORD_BYTES`` (its
pending bytes would grow, and be copied on every read, for as long as the server sends). Each
is a connection error at once, and the client hangs up; before, the client waited for the
rest until its silence timeout (600 s), holding all it had been sent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from wire_server import AnthropicWire, OpenAIWire, Reply, WireServer

from subagents.messages import user_message
from subagents.models import _http, _sse
from subagents.models.base import ModelError, ModelRequest, RequestMetadata, complete


def _request() -> ModelRequest:
    return ModelRequest(
        model="",
        system="You are a test agent.",
        messages=[user_message("hello")],
        tools=[],
        metadata=RequestMetadata(agent_id="a1", agent_type="test", prompt="hello"),
    )


def _model(provider: str, server: WireServer) -> Any:
    wire = AnthropicWire(server) if provider == "anthropic" else OpenAIWire(server)
    return wire.model()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _fails_at_once(provider: str, server: WireServer, raw: list[bytes]) -> ModelError:
    server.queue(Reply(raw=raw))
    model = _model(provider, server)
    try:
        with pytest.raises(ModelError) as caught:
            await asyncio.wait_for(complete(model, _request()), timeout=20)
        await asyncio.wait_for(server.client_hung_up.wait(), timeout=10)
    finally:
        await model.aclose()
    assert caught.value.kind == "connection"
    return caught.value


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_chunk_announced_past_the_bound_is_refused(
    provider: str, wire_server: WireServer
) -> None:
    # Past the split's 256 KiB the buffer is scanned chunk by chunk, which reads the size line
    # (below that, what is buffered is bounded anyway, and a server that goes quiet meets the
    # silence timeout).
    data = [b"data: " + b"x" * 65536 for _ in range(6)]
    error = await _fails_at_once(provider, wire_server, [b"ffffffffffffffff\r\n", *data])
    assert "announced a chunk of 18,446,744,073,709,551,615 bytes" in str(error)


def test_a_chunk_at_the_bound_is_still_waited_for() -> None:
    # The bound refuses only what is past it: a size line of exactly the bound is framing the
    # reader waits on (here: never completed, so the scan keeps it and asks for more).
    buffer = bytearray(b"%x\r\n" % _http.MAX_CHUNK_BYTES + b"abc")
    assert _http._dechunk_scan(buffer) == (b"", False)
    assert len(buffer) > 0


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_an_event_that_never_ends_is_refused_past_the_bound(
    provider: str, wire_server: WireServer
) -> None:
    piece = b"x" * (1 << 20)
    count = _sse.MAX_RECORD_BYTES // len(piece) + 2
    raw = [_chunk(b"data: " + piece)] + [_chunk(piece) for _ in range(count)]
    error = await _fails_at_once(provider, wire_server, raw)
    assert "an event of over 16,777,216 bytes without ending it" in str(error)
