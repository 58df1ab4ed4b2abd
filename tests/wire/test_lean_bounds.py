"""A hostile or broken server cannot make either transport buffer without end.

Each bound through a provider's ``complete`` over a real HTTP server on 127.0.0.1: a chunk
size line announcing more than ``_http.MAX_CHUNK_BYTES`` (the chunk would be held whole until
it had all come), and an SSE record that never ends past ``_sse.MAX_RECORD_BYTES`` (its
pending bytes would grow, and be copied on every read, for as long as the server sends). Each
is a connection error at once, and the client hangs up; before, the client waited for the
rest until its silence timeout (600 s), holding all it had been sent.

The official SDK transport holds the same record bound, with the same words, and two of its
own (``models/_sdk_bounds.py``): an unended record of over ``MAX_RECORD_LINES`` lines (its
decoder copies the record for every line), an error body cut after ``MAX_ERROR_BODY_BYTES``
(it read one whole, for ever), and a coded body it did not ask for refused. Before, an endless
record of 64 MB was still being read after 60 s, the SDK's buffer at 282 MB and growing."""

from __future__ import annotations

import asyncio
import gzip
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_server import AnthropicWire, OpenAIWire, Reply, WireServer

from subagents.messages import user_message
from subagents.models import _http, _sdk_bounds, _sse
from subagents.models._lean import Transport
from subagents.models.base import ModelError, ModelRequest, RequestMetadata, complete


def _request() -> ModelRequest:
    return ModelRequest(
        model="",
        system="You are a test agent.",
        messages=[user_message("hello")],
        tools=[],
        metadata=RequestMetadata(agent_id="a1", agent_type="test", prompt="hello"),
    )


def _model(provider: str, server: WireServer, transport: Transport = "lean") -> Any:
    if provider == "anthropic":
        return AnthropicWire(server, transport=transport).model()
    return OpenAIWire(server, transport=transport).model()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _fails_at_once(
    provider: str,
    server: WireServer,
    raw: list[bytes],
    transport: Transport = "lean",
    *,
    kind: str = "connection",
    **reply: Any,
) -> ModelError:
    server.queue(Reply(raw=raw, **reply))
    model = _model(provider, server, transport)
    try:
        with pytest.raises(ModelError) as caught:
            await asyncio.wait_for(complete(model, _request()), timeout=20)
        await asyncio.wait_for(server.client_hung_up.wait(), timeout=10)
    finally:
        await model.aclose()
    assert caught.value.kind == kind, caught.value
    return caught.value


PROVIDERS_AND_TRANSPORTS = [
    (provider, transport) for provider in ("anthropic", "openai") for transport in ("lean", "sdk")
]


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


@pytest.mark.parametrize(("provider", "transport"), PROVIDERS_AND_TRANSPORTS)
async def test_an_event_that_never_ends_is_refused_past_the_bound(
    provider: str, transport: Transport, wire_server: WireServer
) -> None:
    piece = b"x" * (1 << 20)
    count = _sse.MAX_RECORD_BYTES // len(piece) + 2
    raw = [_chunk(b"data: " + piece)] + [_chunk(piece) for _ in range(count)]
    error = await _fails_at_once(provider, wire_server, raw, transport)
    assert str(error).endswith(
        ": connection failed: the server sent an event of over 16,777,216 bytes without ending it"
    ), error


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
async def test_the_sdk_refuses_an_event_of_endless_short_lines(
    provider: str, ending: bytes, wire_server: WireServer
) -> None:
    """Lines each ended and no blank line: the SDK's decoder copied all it held for every line
    (8-byte lines: days before the byte bound). Past ``MAX_RECORD_LINES`` lines it is refused,
    in whichever line ends; a record ended by a blank line starts the count again, so a long
    stream of short records passes the same bound, and the first records were read."""
    short = b"".join(b"event: ping" + ending + b"data: {}" + ending + ending for _ in range(200))
    endless = (b"data: x" + ending) * (_sdk_bounds.MAX_RECORD_LINES + 1)
    raw = [_chunk(short), _chunk(b": open" + ending), _chunk(endless)]
    error = await _fails_at_once(provider, wire_server, raw, "sdk")
    assert str(error).endswith(
        f": connection failed: the server sent an event of over"
        f" {_sdk_bounds.MAX_RECORD_LINES} lines without ending it"
    ), error


@pytest.mark.parametrize(("provider", "transport"), PROVIDERS_AND_TRANSPORTS)
async def test_an_error_body_that_never_ends_is_cut(
    provider: str, transport: Transport, wire_server: WireServer
) -> None:
    """A 429 whose body goes on: both transports read ``MAX_ERROR_BODY_BYTES`` of it and
    report the status (the SDK waited for the end of it, holding all it was sent)."""
    piece = _chunk(b"x" * (256 << 10))
    count = _sdk_bounds.MAX_ERROR_BODY_BYTES // (256 << 10) + 2
    error = await _fails_at_once(
        provider, wire_server, [piece] * count, transport, kind="rate_limit", status=429
    )
    assert error.status == 429


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_the_sdk_asks_for_no_coding_and_refuses_a_coded_body(
    provider: str, wire_server: WireServer
) -> None:
    """What the bounds count is the bytes that came: a gzip body of a few kilobytes inflates to
    gigabytes past them. The SDK asked for gzip; now for identity, and a coded body fails."""
    bomb = gzip.compress(b"data: " + b"x" * (64 << 20), compresslevel=9)
    error = await _fails_at_once(
        provider, wire_server, [_chunk(bomb)], "sdk", headers={"content-encoding": "gzip"}
    )
    assert str(error).endswith(
        ": connection failed: the server sent a body in content-encoding 'gzip',"
        " which was not asked for"
    ), error
    assert wire_server.requests[-1].headers["accept-encoding"] == "identity"


class _SDKDecoderBuffer:
    """The SDK decoder's buffer rule (``anthropic._streaming.SSEDecoder._iter_chunks``, the
    same in openai's), step by step: each line of each read appended, the buffer emptied after
    a line that leaves it ending in a blank line."""

    def __init__(self) -> None:
        self.data = b""
        self.records: list[bytes] = []

    def feed(self, chunk: bytes) -> None:
        for line in chunk.splitlines(keepends=True):
            self.data += line
            if self.data.endswith((b"\r\r", b"\n\n", b"\r\n\r\n")):
                self.records.append(self.data)
                self.data = b""


_READS = st.lists(st.text(alphabet="\r\nx:", max_size=40).map(str.encode), max_size=12)


@settings(max_examples=500, deadline=None)
@given(_READS)
def test_the_open_record_is_what_the_sdk_decoder_holds(reads: list[bytes]) -> None:
    """After every read, ``OpenRecord`` counts within a blank line's bytes (and lines) of
    what the SDK decoder holds: the bound refuses what the SDK would hold, not more."""
    import anthropic._streaming

    reference, record = _SDKDecoderBuffer(), _sdk_bounds.OpenRecord()
    for data in reads:
        reference.feed(data)
        record.feed(data)
        assert abs(record.held - len(reference.data)) <= 3, (record, reference.data)
        held_lines = len(reference.data.splitlines())
        assert abs(record.lines - held_lines) <= 3, (record, reference.data)
    # The rule is the SDK's own: the installed decoder gives the same records.
    real = list(anthropic._streaming.SSEDecoder()._iter_chunks(iter(reads)))
    assert real == reference.records + ([reference.data] if reference.data else [])
