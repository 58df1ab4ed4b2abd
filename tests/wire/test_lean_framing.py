"""The lean HTTP client's chunked-body reader: its fast path against the chunk-by-chunk scan.

``_dechunk`` takes the usual body (plain hex size lines, no CRLF inside a chunk) in C-level
passes and hands everything else to ``_dechunk_scan``. Both must leave the same data, the same
"final chunk seen" flag and the same bytes in the buffer for every body split anywhere, so the
fast path can never read a framing differently.
"""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import pytest

from subagents.models import _http, _sse
from subagents.models import openai as openai_module
from subagents.models.openai import ChunkAssembler


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
    "chunks after the last chunk": _chunked([b"abc"]) + _chunked([b"def", b"gh"]),
    "upper-case hex": b"1A\r\n" + b"y" * 26 + b"\r\n0\r\n\r\n",
    "leading zeros": b"01a\r\n" + b"y" * 26 + b"\r\n3\r\nabc\r\n00\r\n\r\n",
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
    pieces, final = _http._dechunk_split(buffer) or ([], False)
    assert final and buffer == b""
    assert pieces == [b"event: ping\ndata: {}\n\n", b'data: {"a":1}\n\n', b"x" * 300]


@pytest.mark.parametrize("name", ["a CRLF inside a chunk", "extensions", "a trailer"])
def test_framings_the_fast_path_cannot_prove_go_to_the_scan(name: str) -> None:
    assert _http._dechunk_split(bytearray(BODIES[name])) is None


def test_a_bad_size_line_is_an_error_on_both_paths() -> None:
    for body in (b"zz\r\nabc\r\n", b"-3\r\nabc\r\n"):
        with pytest.raises(_http.HTTPTransportError, match="bad chunk size line"):
            _http._dechunk(bytearray(body))


@pytest.mark.parametrize(
    "body",
    [b"3\r\nabcXY0\r\n\r\n", b"2\r\nabc\r\n0\r\n\r\n", b"4\r\nabc\r\n0\r\n\r\n\r\n"],
)
def test_a_chunk_not_followed_by_crlf_is_an_error_on_both_paths(body: bytes) -> None:
    # Before: the scan skipped two bytes after the data whatever they were, and read on.
    for scan in (False, True):
        with pytest.raises(_http.HTTPTransportError, match="not followed by CRLF"):
            _http._dechunk_scan(bytearray(body)) if scan else _http._dechunk(bytearray(body))


# --- SSE records: the decoder split anywhere against a line-by-line reading

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
    "a field without a colon": b"data\nevent\n\nevent: x\ndataX: 1\ndata: 2\n\n",
}


def _by_lines(stream: bytes) -> list[object]:
    """The WHATWG reading, line by line: what the decoder's whole-read splits must give."""
    lines = stream.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    lines.pop()  # after the last line end: an unfinished line
    events: list[object] = []
    name: str | None = None
    data: list[bytes] = []
    for line in lines:
        if not line:
            if data:
                events.append((name, b"\n".join(data)))
            name, data = None, []
            continue
        field, colon, value = line.partition(b":")
        value = value[1:] if colon and value[:1] == b" " else value
        if field == b"data":
            data.append(value)
        elif field == b"event":
            name = value.decode("utf-8", "replace")
    return events


def _decode(stream: bytes, cuts: list[int]) -> list[object]:
    decoder = _sse.SSEDecoder()
    seen: list[object] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        seen += decoder.feed(stream[start:cut])
        start = cut
    return seen + decoder.flush()


@pytest.mark.parametrize("name", sorted(SSE_STREAMS))
def test_the_decoder_reads_every_split_as_a_line_by_line_reading(name: str) -> None:
    stream = SSE_STREAMS[name]
    expected = _by_lines(stream)
    assert _decode(stream, []) == expected
    for cut in range(len(stream) + 1):
        assert _decode(stream, [cut]) == expected, cut
    rng = random.Random(11)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(stream)), min(len(stream) - 1, rng.randint(1, 5))))
        assert _decode(stream, cuts) == expected, cuts


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


# --- response heads: the C-level header passes against a line-by-line reading


def _head_by_lines(buffer: bytes) -> tuple[int, dict[str, str], bytes]:
    end = buffer.find(b"\r\n\r\n")
    lines = buffer[:end].decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].partition(" ")[2][:3]), headers, buffer[end + 4 :]


def test_response_heads_are_read_as_a_line_by_line_reading_reads_them() -> None:
    """Names lower-cased and stripped, values stripped, a line without a colon a name with an
    empty value, a repeated name's last value, bare CRs and LFs inside lines, non-ASCII."""
    rng = random.Random(5)
    pieces = ["a", "B", ":", " ", "\t", "X-Y", "\r\n", "7", ": ", "::", "\r", "\n", "é"]
    for _ in range(3000):
        head = "HTTP/1.1 200 OK" + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        raw = head.encode() + b"\r\n\r\nbody"
        status, headers, rest = _head_by_lines(raw)
        for _ in range(2):  # read, then read again from the lines already read
            buffer = bytearray(raw)
            assert _http._parse_head(buffer, eof=False) == (status, headers), head
            assert buffer == rest
    assert 0 < len(_http._HEADER_LINES) <= _http._HEADER_LINES_KEPT
    assert 0 < len(_http._STATUS_LINES) <= _http._HEADER_LINES_KEPT
    assert _http._parse_head(bytearray(b"HTTP/1.1 204 No Content\r\n\r\n"), eof=False) == (204, {})
    assert _http._parse_head(bytearray(b"HTTP/1.1 200 OK\r\nA: b\r\n"), eof=False) is None
    with pytest.raises(_http.HTTPTransportError, match="without a response"):
        _http._parse_head(bytearray(b"HTTP/1.1 200 OK\r\nA: b\r\n"), eof=True)
    with pytest.raises(_http.HTTPTransportError, match=r"not an HTTP/1\.x response"):
        _http._parse_head(bytearray(b"SSH-2.0\r\n\r\n"), eof=False)


# --- OpenAI chunks: the skipped opening against the whole chunk parsed


def _openai_chunks(name: str) -> list[bytes]:
    body = (Path(__file__).resolve().parents[2] / "bench" / "recorded" / name).read_bytes()
    return [e[1] for e in _sse.SSEDecoder().feed(body) if e[1] != b"[DONE]"]


def _state(assembler: ChunkAssembler) -> object:
    calls = {i: (c.id, c.name, "".join(c.arguments)) for i, c in assembler.calls.items()}
    return ("".join(assembler.text), calls, assembler.finish_reason, assembler.usage)


def _fed(chunks: list[bytes], *, whole: bool) -> object:
    """What an assembler makes of ``chunks``: through ``feed_events`` (the skip), or each
    chunk parsed whole; ``"not JSON"`` when the stream is refused."""
    assembler = ChunkAssembler()
    try:
        if whole:
            for data in chunks:
                assembler.feed(orjson.loads(data))
        else:
            assembler.feed_events([(None, data) for data in chunks])
    except (orjson.JSONDecodeError, _http.HTTPTransportError):
        return "not JSON"
    return _state(assembler)


@pytest.mark.parametrize("name", ["openai_tool_call.sse", "openai_text.sse"])
def test_openai_chunks_read_with_their_opening_skipped_as_when_parsed_whole(name: str) -> None:
    chunks = _openai_chunks(name)
    assembler = ChunkAssembler()
    assembler.feed_events([(None, data) for data in chunks])
    opening = chunks[0][: chunks[0].find(b'"choices":')]
    assert assembler.skip == opening and len(opening) > 100  # the skip is taken
    assert _state(assembler) == _fed(chunks, whole=True)
    first, later = chunks[0], chunks[1:]
    for index, data in enumerate(later):
        rest = data[len(opening) :]
        variants = [data[:cut] for cut in range(len(opening), len(data))]
        variants += [
            opening + b" " + rest,
            opening + b"}",
            opening + b'"usage":null}',
            opening + b'"choices":[],' + rest,
            opening + rest + b"x",
            opening[:-1] + b" ," + rest,
            opening + rest.replace(b'"index":0', b'"index":00', 1),
            opening + rest.replace(b"null", b"nul", 1),
            opening + b'"\xff":1,' + rest,
        ]
        for variant in variants:
            stream = [first, *later[:index], variant]
            assert _fed(stream, whole=False) == _fed(stream, whole=True), variant


@pytest.mark.parametrize(
    "chunk",
    [
        b'{"usage":null,"choices":[]}',  # a member this reads, before choices
        b'{"id":"a","usage":{"prompt_tokens":1},"choices":[]}',
        b'{"choices":[],"id":"a"}',  # nothing before choices
        b'{"a":{"b":1,"choices":2},"choices":[]}',  # a nested key found first
        b'{,"choices":[]}',  # no member: a lone comma
        b'{"error":{"message":"m"},"choices":[]}',
    ],
)
def test_an_opening_that_cannot_be_proven_is_not_skipped(chunk: bytes) -> None:
    """(A ``"choices":`` inside a string cannot follow a bare comma: its quote is escaped.)"""
    assert openai_module._skippable(chunk) == b""
    assembler = ChunkAssembler()
    try:
        assembler.feed_events([(None, chunk)])
    except Exception:  # an error chunk fails the call, as parsed whole
        pass
    assert not assembler.skip


@pytest.mark.parametrize("name", ["openai_tool_call.sse", "openai_text.sse"])
def test_a_first_chunk_that_does_nothing_is_read_by_its_bytes_as_when_parsed_whole(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream's first chunk (the role, no text) is looked up by its bytes after its own
    opening once a stream has shown them to do nothing (``openai._learn_idle``). Only the
    opening is parsed then; the next stream's opening (another id) and every corruption of
    it or of the rest read as the whole chunk parsed does, errors included."""
    openai_module._IDLE.clear()
    chunks = _openai_chunks(name)
    first, later = chunks[0], chunks[1:]
    cut = first.find(b'"choices":')
    opening, rest = first[:cut], first[cut:]
    assert _fed(chunks, whole=False) == _fed(chunks, whole=True)
    assert {rest} == openai_module._IDLE  # learnt from the first stream

    parsed: list[bytes] = []
    loads = orjson.loads

    def counting(data: bytes | str) -> object:
        parsed.append(bytes(data) if not isinstance(data, str) else data.encode())
        return loads(data)

    monkeypatch.setattr(orjson, "loads", counting)
    other = opening.replace(b"chatcmpl-", b"chatcmpl-other-")
    assert _fed([other + rest, *later], whole=False) == _fed(chunks, whole=True)
    assert other + rest not in parsed  # looked up, not parsed whole
    monkeypatch.setattr(orjson, "loads", loads)

    openings = [
        other,
        opening[:-1] + b" ,",
        opening[:-1],  # no comma: the rest is no member of the opening's object
        opening[:1] + b" " + opening[1:],
        b" " + opening,
        opening.replace(b'"id"', b'"id', 1),
        opening.replace(b'"created":', b'"created":0', 1),
        opening + b'"usage":{"prompt_tokens":5},',  # a member this reads: not skippable
        opening + b'"choices":[{"delta":{"content":"x"}}],',  # choices twice: the last counts
        b'{"choices":[],' + opening[1:],
        opening.replace(b"{", b"[", 1),
        opening + b'"\xff":1,',
        b"",
    ]
    rests = [
        rest,
        rest[:-1],
        rest + b"x",
        rest.replace(b'"content":""', b'"content":"x"'),
        rest.replace(b"null", b"nul", 1),
        rest.replace(b'"index":0', b'"index":1', 1),
        b" " + rest,
    ]
    for head in openings:
        for tail in rests:
            stream = [head + tail, *later]
            assert _fed(stream, whole=False) == _fed(stream, whole=True), head + tail
