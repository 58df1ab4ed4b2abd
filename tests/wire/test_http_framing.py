"""The lean HTTP client's chunked-body reader: its fast path against the chunk-by-chunk scan.

``_dechunk`` takes the usual body (plain hex size lines, no CRLF inside a chunk) in C-level
passes and hands everything else to ``_dechunk_scan``. Both must leave the same data, the same
"final chunk seen" flag and the same bytes in the buffer for every body split anywhere, so the
fast path can never read a framing differently.
"""

from __future__ import annotations

import random

import pytest

from subagents.models import _http


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
