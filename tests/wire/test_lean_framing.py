"""The lean HTTP client's chunked-body reader: its fast path against the chunk-by-chunk scan.

``_dechunk`` takes the usual body (plain hex size lines, no CRLF inside a chunk) in C-level
passes and hands everything else to ``_dechunk_scan``. Both must leave the same data, the same
"final chunk seen" flag and the same bytes in the buffer for every body split anywhere, so the
fast path can never read a framing differently.
"""

from __future__ import annotations

import random

import pytest

from subagents.models import _http, _sse


def _chunked(pieces: list[bytes], *, extension: bool = False, trailer: bool = False) -> bytes:
    out = b""
    for piece in pieces:
        size = f"{len(piece):x}".encode()
        out += size + (b";name=value" if extension else b"") + b"\r\n" + piece + b"\r\n"
    return out + b"0\r\n" + (b"X-Trailer: yes\r\n" if trailer else b"") + b"\r\n"


BODIES = {
    "sse records": _chunked([b"event: ping\ndata: {}\n\n", b'data: {"a":1}\n\n', b"x" * 300]),
    "a CRLF inside a chunk": _chunked([b"a\r\nb", b"\r\n", b"\r\n\r\n", b"end\r"]),
    "extensions": _chunked([b"one", b"two"], extension=True),
    "a trailer": _chunked([b"one", b"two"], trailer=True),
    "empty pieces around": _chunked([b"\r", b"\n", b"0\r\n", b"ab"]),
    "bytes after the last chunk": _chunked([b"abc"]) + b"HTTP/1.1 200 OK\r\n",
    "upper-case hex": b"1A\r\n" + b"y" * 26 + b"\r\n0\r\n\r\n",
}


def _read(body: bytes, cuts: list[int], *, scan: bool) -> list[tuple[bytes, bool, bytes]]:
    buffer = bytearray()
    seen: list[tuple[bytes, bool, bytes]] = []
    start = 0
    for cut in [*cuts, len(body)]:
        buffer += body[start:cut]
        start = cut
        piece, final = _http._dechunk_scan(buffer) if scan else _http._dechunk(buffer)
        seen.append((piece, final, bytes(buffer)))
        if final:
            break
    return seen


@pytest.mark.parametrize("name", sorted(BODIES))
def test_the_fast_path_reads_every_split_as_the_scan_does(name: str) -> None:
    body = BODIES[name]
    for cut in range(len(body) + 1):
        assert _read(body, [cut], scan=False) == _read(body, [cut], scan=True), cut
    rng = random.Random(7)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(body)), min(len(body) - 1, rng.randint(1, 6))))
        assert _read(body, cuts, scan=False) == _read(body, cuts, scan=True), cuts


def test_the_fast_path_reads_a_whole_body_in_one_pass() -> None:
    body = BODIES["sse records"]
    buffer = bytearray(body)
    piece, final = _http._dechunk_split(buffer) or (b"", False)
    assert final and buffer == b""
    assert piece == b'event: ping\ndata: {}\n\ndata: {"a":1}\n\n' + b"x" * 300


@pytest.mark.parametrize("name", ["a CRLF inside a chunk", "extensions", "a trailer"])
def test_framings_the_fast_path_cannot_prove_go_to_the_scan(name: str) -> None:
    assert _http._dechunk_split(bytearray(BODIES[name])) is None


def test_a_bad_size_line_is_an_error_on_both_paths() -> None:
    for body in (b"zz\r\nabc\r\n", b"-3\r\nabc\r\n"):
        with pytest.raises(_http.HTTPTransportError, match="bad chunk size line"):
            _http._dechunk(bytearray(body))


# --- SSE records: the decoder's one-pass reading of the APIs' shapes against the record loop

SSE_STREAMS = {
    "anthropic": (
        b'event: message_start\ndata: {"type":"message_start"}\n\n'
        b'event: ping\ndata: {"type":"ping"}\n\n'
        b'event: content_block_delta\ndata: {"text":"a\\nb"}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    ),
    "openai": b'data: {"choices":[]}\n\ndata: {"x":1}\n\ndata: [DONE]\n\n',
    "an unknown event name": b"event: surprise\ndata: 1\n\nevent: ping\ndata: 2\n\n",
    "an empty event name": b"event: \ndata: 1\n\nevent: ping\ndata: 2\n\n",
    "empty data": b"event: ping\ndata: \n\ndata: \n\n",
    "three newlines": b"data: 1\n\n\ndata: 2\n\n\n\ndata: 3\n\n",
    "no space after the colon": b"event:ping\ndata:1\n\ndata:2\n\n",
    "comments and other fields": b": hi\nevent: ping\nid: 3\ndata: 1\n\nretry: 5\ndata: 2\n\n",
    "two data lines": b"event: ping\ndata: 1\ndata: 2\n\ndata: 3\ndata: 4\n\n",
    "mixed shapes": b"data: 1\n\nevent: ping\ndata: 2\n\ndata: 3\n\n",
    "garbage between records": b"event: ping\ndata: 1\n\nxyzevent: ping\ndata: 2\n\n",
    "CRLF": b"event: ping\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n",
    "CR": b"event: ping\rdata: 1\r\rdata: 2\r\r",
    "an unterminated last record": b"event: ping\ndata: 1\n\nevent: ping\ndata: 2\n",
    "a last record ended by a CR": b"data: 1\n\ndata: 2\n\r",
}


def _decode(stream: bytes, cuts: list[int], *, general: bool) -> list[object]:
    decoder = _sse.SSEDecoder()
    # ``split_feed``: every read through the record loop, never the one-pass reading
    feed = decoder.split_feed if general else decoder.feed
    seen: list[object] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        seen.append(feed(stream[start:cut]))
        start = cut
    seen.append(decoder.flush())
    return seen


@pytest.mark.parametrize("name", sorted(SSE_STREAMS))
def test_the_one_pass_sse_reading_gives_what_the_record_loop_gives(name: str) -> None:
    stream = SSE_STREAMS[name]
    assert _decode(stream, [], general=False) == _decode(stream, [], general=True)
    for cut in range(len(stream) + 1):
        assert _decode(stream, [cut], general=False) == _decode(stream, [cut], general=True)
    rng = random.Random(11)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(stream)), min(len(stream) - 1, rng.randint(1, 5))))
        assert _decode(stream, cuts, general=False) == _decode(stream, cuts, general=True)


def test_the_one_pass_reading_takes_the_apis_shapes_and_only_those() -> None:
    assert _sse._uniform(SSE_STREAMS["anthropic"], len(SSE_STREAMS["anthropic"])) == [
        ("message_start", b'{"type":"message_start"}'),
        ("ping", b'{"type":"ping"}'),
        ("content_block_delta", b'{"text":"a\\nb"}'),
        ("message_stop", b'{"type":"message_stop"}'),
    ]
    openai = SSE_STREAMS["openai"]
    assert _sse._uniform(openai, len(openai)) == [
        (None, b'{"choices":[]}'),
        (None, b'{"x":1}'),
        (None, b"[DONE]"),
    ]
    for name in ("an unknown event name", "garbage between records", "mixed shapes"):
        stream = SSE_STREAMS[name]
        assert _sse._uniform(stream, len(stream)) is None, name


@pytest.mark.parametrize(
    ("stream", "last"),
    [
        (b"data: 1\n\ndata: 2", []),
        (b"data: 1\n\ndata: 2\n", []),
        (b"data: 1\r\n\r\ndata: 2\r\n", []),
        (b"data: 1\n\ndata: 2\n\r", [(None, b"2")]),
        (b"data: 1\r\rdata: 2\r\r", [(None, b"2")]),
        (b"data: 1\r\n\r\nevent: ping\r\ndata: 2\r\n\r", [("ping", b"2")]),
    ],
)
def test_the_end_of_a_stream_completes_only_a_record_it_ends(
    stream: bytes, last: list[object]
) -> None:
    """As the SDKs' decoders: a last record without its blank line is dropped, and a CR held
    back as maybe half of a CRLF ends its line at the end of the stream."""
    for cut in range(len(stream) + 1):
        decoder = _sse.SSEDecoder()
        events = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:])
        assert events + decoder.flush() == [(None, b"1"), *last], cut
