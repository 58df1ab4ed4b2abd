"""A small HTTP/1.1 client for the providers' one request shape: POST a JSON body, read the reply.

Why not the HTTP library the SDKs use: measured on the bench's replayed streams, ``httpx`` with
its ``h11`` parser costs ~1 ms of CPU per streamed response (every chunk walks a dozen layers and
a state machine), against ~0.1 ms here. This client does only what a model API needs:

* keep-alive connections pooled per origin (a fan-out of 50 children reuses 50 connections;
  an idle connection the server has closed is dropped, never reused, and one idle for longer
  than ``KEEPALIVE_S`` is closed);
* TLS with the system's trust store (``ssl.create_default_context``, which honours
  ``SSL_CERT_FILE``/``SSL_CERT_DIR``);
* response bodies framed by ``content-length``, ``transfer-encoding: chunked`` or the end of
  the connection, handed to the caller as they arrive: whole network reads, de-chunked (the
  chunks' data as they came, not joined: ``Response.each``), not line by line;
* a connect timeout and a read timeout (the longest silence tolerated mid-response).

Anything else — proxies, HTTP/2, redirects, compression — is the SDK path's job; the providers
use it whenever such a setting is in force (see ``lean_transport_allowed``).

A response that ends early (the connection drops mid-body) raises ``HTTPTransportError``, the
same as a refused connection: the providers map both to a retryable ``connection`` error.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import ssl
import time
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 600.0
"""The SDKs' default request timeout, used here as the longest silence within a response."""
KEEPALIVE_S = 5.0
MAX_IDLE_PER_ORIGIN = 100
MAX_HEAD_BYTES = 64 * 1024
MAX_CHUNK_BYTES = 64 * 1024 * 1024
"""The largest HTTP chunk read: a chunk is held whole until it has all come, so a size line
of ``ffffffffffffffff`` from a hostile or broken server would have the client buffer whatever
it sends, without end. Either API's chunks are an SSE record or a JSON body: kilobytes."""


class HTTPTransportError(Exception):
    """The connection failed, timed out or ended before the response did."""


class Origin:
    """Scheme, host and port (the pool key) and the base URL's path. A plain class, as are the
    others here: a dataclass costs milliseconds of start-up to create (issue 20)."""

    __slots__ = ("base_path", "host", "host_header", "key", "port", "scheme")

    def __init__(self, scheme: str, host: str, port: int, base_path: str) -> None:
        self.scheme, self.host, self.port = scheme, host, port
        self.base_path = base_path
        """The URL's path without a trailing slash, e.g. ``/v1`` for an OpenAI-style base URL."""
        self.key = (scheme, host, port, base_path)
        """What the pool is keyed by (a tuple: hashed in C on every call, no method)."""
        default = 443 if scheme == "https" else 80
        bracketed = f"[{host}]" if ":" in host else host
        self.host_header = bracketed if port == default else f"{bracketed}:{port}"
        """The ``Host`` header's value."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Origin) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    @classmethod
    def parse(cls, url: str) -> Origin:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base URL {url!r}: expected http://HOST[:PORT][/PATH] or https://…")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))


def lean_transport_allowed(origin: Origin) -> bool:
    """False when a proxy applies to ``origin`` (``HTTPS_PROXY`` and friends, minus
    ``NO_PROXY``): the SDK's client knows how to use one, this one does not."""
    proxies = proxy_environment()
    if origin.scheme not in proxies and "all" not in proxies:
        return True
    return _bypassed(origin.host, proxies.get("no", ""))


def proxy_environment() -> dict[str, str]:
    """``*_proxy`` variables by scheme (``https``, ``all``, ``no``…), the lower-case spelling
    winning, as ``urllib.request.getproxies_environment`` reads them — without importing
    ``urllib.request``, which pulls in ``http.client`` and ``email`` (a tenth of start-up)."""
    found: dict[str, str] = {}
    for prefer_lower in (False, True):
        for name, value in os.environ.items():
            if name[-6:].lower() == "_proxy" and (name.islower() == prefer_lower) and value:
                found[name[:-6].lower()] = value
    return found


def _bypassed(host: str, no_proxy: str) -> bool:
    """``NO_PROXY`` as curl reads it: ``*``, or names matching the host or a parent domain."""
    for entry in (part.strip().lower().lstrip(".") for part in no_proxy.split(",")):
        if entry == "*" or (entry and (host == entry or host.endswith("." + entry))):
            return True
    return False


class _Connection(asyncio.Protocol):
    """One socket: bytes land in ``buffer``; a reader waits on ``readable()``."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.eof = False
        self.idle_since = 0.0
        self.last_read = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._timed_out = False
        self.limit_s = READ_TIMEOUT_S

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self.last_read = time.monotonic()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = self.eof = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def readable(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wait until more bytes arrived or the connection ended (or the watchdog fired)."""
        if self._timed_out:
            raise HTTPTransportError(f"no data from the server for {self.limit_s:g} s")
        waiter = self._waiter = loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None
        if self._timed_out:
            raise HTTPTransportError(f"no data from the server for {self.limit_s:g} s")

    def time_out(self) -> None:
        """The read timeout passed (``HTTPClient._sweep``): the waiting reader raises."""
        self._timed_out = True
        self.close()

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.abort()
        self._wake()


class Response:
    """A response whose head has been read; ``body()`` yields the rest as it arrives, and
    ``each(sink)`` hands it to ``sink`` (the same, without an async generator: a call's
    ``respond`` is the hot path, and every async generator costs a first-iteration hook, a
    weak reference and a finaliser)."""

    __slots__ = (
        "_client",
        "_connection",
        "_done",
        "_framing",
        "_left",
        "_loop",
        "_origin",
        "headers",
        "status",
    )

    def __init__(
        self,
        status: int,
        headers: dict[str, str],
        client: HTTPClient,
        connection: _Connection,
        origin: Origin,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.status = status
        self.headers = headers
        self._client = client
        self._connection = connection
        self._origin = origin
        self._loop = loop
        self._done = False
        self._framing = _framing(headers)
        self._left = _content_length(headers) if self._framing is _SIZED else 0

    async def each(self, sink: Callable[[list[bytes]], object]) -> None:
        """Call ``sink`` with the body as it arrives: each time, the data of the HTTP chunks
        that have come in whole (one piece for a body not chunked; never an empty piece or
        list). Chunks are handed over as they came, not joined: a reader that can use where
        they end (``_lean``: an SSE record per chunk, usually) spares a pass. The connection
        goes back to the pool once it has all been read; an error (or ``sink`` raising)
        closes it."""
        connection, loop = self._connection, self._loop
        buffer, chunked = connection.buffer, self._framing is _CHUNKED
        while True:
            if chunked:
                pieces, finished = _dechunk_pieces(buffer)
            else:
                piece, finished = self._take()
                pieces = [piece] if piece else []
            if pieces:
                sink(pieces)
            if finished:
                break
            if connection.eof and self._framing is not _UNTIL_CLOSE:
                raise HTTPTransportError(_ENDED_EARLY)
            await connection.readable(loop)
        self._finish()

    async def body(self) -> AsyncIterator[bytes]:
        """The body, de-chunked; as ``each``, stopping early closes the connection."""
        while True:
            piece, finished = self._take()
            if piece:
                yield piece
            if finished:
                break
            await self._more()
        self._finish()

    async def read(self, limit: int = 1 << 20) -> bytes:
        """The whole body (error responses), at most ``limit`` bytes."""
        parts: list[bytes] = []
        size = 0
        async for piece in self.body():
            parts.append(piece)
            size += len(piece)
            if size > limit:
                break
        return b"".join(parts)[:limit]

    def close(self) -> None:
        """Drop the connection unless the body was read to its end."""
        if not self._done:
            self._done = True
            self._client._active.discard(self._connection)
            self._connection.close()

    def _take(self) -> tuple[bytes, bool]:
        """What of the body is in the buffer, and whether that was all of it."""
        buffer = self._connection.buffer
        if self._framing is _CHUNKED:
            return _dechunk(buffer)
        if self._framing is _SIZED:
            piece = bytes(buffer[: self._left])
            del buffer[: len(piece)]
            self._left -= len(piece)
            return piece, self._left <= 0
        piece = bytes(buffer)
        buffer.clear()
        if self._connection.eof:
            self.headers["connection"] = "close"
            return piece, True
        return piece, False

    async def _more(self) -> None:
        connection = self._connection
        if connection.eof and self._framing is not _UNTIL_CLOSE:
            raise HTTPTransportError(_ENDED_EARLY)
        await connection.readable(self._loop)

    def _finish(self) -> None:
        self._done = True
        keep = self.headers.get("connection", "").lower() != "close"
        self._client._release(self._origin, self._connection, reuse=keep)


_CHUNKED, _SIZED, _UNTIL_CLOSE = "chunked", "sized", "until close"
_ENDED_EARLY = "the server closed the connection before the response ended"


def _framing(headers: dict[str, str]) -> str:
    if headers.get("transfer-encoding", "").lower().endswith("chunked"):
        return _CHUNKED
    return _SIZED if "content-length" in headers else _UNTIL_CLOSE


def _content_length(headers: dict[str, str]) -> int:
    raw = headers["content-length"]
    try:
        return max(int(raw), 0)
    except ValueError:
        raise HTTPTransportError(f"bad content-length: {raw[:40]!r}") from None


class HTTPClient:
    """Pooled keep-alive connections; ``post`` sends one request and returns its head."""

    __slots__ = ("_active", "_idle", "_ssl", "_sweeper", "read_timeout_s")

    def __init__(self, *, read_timeout_s: float = READ_TIMEOUT_S) -> None:
        self.read_timeout_s = read_timeout_s
        self._idle: dict[tuple[str, str, int, str], list[_Connection]] = {}
        """Idle connections by ``Origin.key``."""
        self._active: set[_Connection] = set()
        """Connections with a request in flight: the read-timeout sweep looks at these."""
        self._sweeper: asyncio.TimerHandle | None = None
        self._ssl: ssl.SSLContext | None = None

    async def post(self, origin: Origin, path: str, headers: bytes, body: bytes) -> Response:
        """POST ``body`` to ``origin.base_path + path``; ``headers`` are ready ``Name: value\\r\\n``
        lines (the caller builds them once per model)."""
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        connection = self._idle_connection(origin, now)
        if connection is None:
            connection = await self._connect(loop, origin)
            now = time.monotonic()
        head = (
            f"POST {origin.base_path}{path} HTTP/1.1\r\nHost: {origin.host_header}\r\n"
            f"Content-Length: {len(body)}\r\n"
        ).encode()
        transport = connection.transport
        assert transport is not None
        self._watch(loop, connection, now)
        transport.write(head + headers + b"\r\n" + body)
        try:
            while True:  # the head, after any interim (1xx) responses
                parsed = _parse_head(connection.buffer, eof=connection.eof)
                if parsed is None:
                    await connection.readable(loop)
                elif not 100 <= parsed[0] < 200:
                    return Response(parsed[0], parsed[1], self, connection, origin, loop)
        except BaseException:
            connection.close()
            raise

    async def aclose(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()

    def _idle_connection(self, origin: Origin, now: float) -> _Connection | None:
        idle = self._idle.get(origin.key)
        while idle:
            connection = idle.pop()
            if connection.eof or connection.buffer or now - connection.idle_since > KEEPALIVE_S:
                connection.close()
                continue
            return connection
        return None

    def _release(self, origin: Origin, connection: _Connection, *, reuse: bool) -> None:
        self._active.discard(connection)
        idle = self._idle.get(origin.key)
        if idle is None:
            idle = self._idle[origin.key] = []
        if not reuse or connection.eof or connection.buffer or len(idle) >= MAX_IDLE_PER_ORIGIN:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        idle.append(connection)

    def _watch(self, loop: asyncio.AbstractEventLoop, connection: _Connection, now: float) -> None:
        """Put ``connection`` under the read timeout. One sweep timer per client checks every
        connection in flight, instead of a timer per request or per read (either was a
        measurable share of a call's CPU); a timeout therefore fires between 1 and 1.25 times
        ``read_timeout_s`` of silence."""
        connection.last_read = now
        connection.limit_s = self.read_timeout_s
        self._active.add(connection)
        if self._sweeper is None:
            self._sweeper = loop.call_later(self.read_timeout_s / 4, self._sweep, loop)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        self._sweeper = None
        now = time.monotonic()
        for connection in list(self._active):
            if now - connection.last_read >= self.read_timeout_s:
                self._active.discard(connection)
                connection.time_out()
        if self._active:
            self._sweeper = loop.call_later(self.read_timeout_s / 4, self._sweep, loop)

    async def _connect(self, loop: asyncio.AbstractEventLoop, origin: Origin) -> _Connection:
        context = self._ssl_context() if origin.scheme == "https" else None
        try:
            _transport, connection = await asyncio.wait_for(
                loop.create_connection(
                    _Connection,
                    origin.host,
                    origin.port,
                    ssl=context,
                    server_hostname=origin.host if context else None,
                ),
                CONNECT_TIMEOUT_S,
            )
        except (TimeoutError, OSError, ssl.SSLError) as exc:
            raise HTTPTransportError(f"cannot connect to {origin.host_header}: {exc}") from exc
        return connection

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
            if os.environ.get("SSLKEYLOGFILE"):
                self._ssl.keylog_filename = os.environ["SSLKEYLOGFILE"]
        return self._ssl


def _dechunk(buffer: bytearray) -> tuple[bytes, bool]:
    """Take every complete chunk off the front of ``buffer``: (their data, whether the final
    chunk was among them)."""
    pieces, final = _dechunk_pieces(buffer)
    return b"".join(pieces), final


def _dechunk_pieces(buffer: bytearray) -> tuple[list[bytes], bool]:
    """``_dechunk`` with the chunks' data not joined: one piece per chunk (none empty) when
    the split reads the buffer, else one piece for everything the scan took."""
    split = _dechunk_split(buffer) if len(buffer) <= _SPLIT_MAX else None
    if split is not None:
        return split
    piece, final = _dechunk_scan(buffer)
    return ([piece] if piece else []), final


_SPLIT_MAX = 256 * 1024
"""Above this the buffer is scanned: a split copies all of it on each read, and a big chunk
arriving over many reads would be copied once per read."""


def _dechunk_split(buffer: bytearray) -> tuple[list[bytes], bool] | None:
    """The usual case in C-level passes, no Python step per chunk: split at every CRLF, and if
    every size line is plain hex and every piece after it is exactly that long, the pieces are
    the chunks (the first piece that contains a CRLF of its own is shorter than its size, so a
    match proves the framing). None when it does not match (extensions, trailers, a CRLF in a
    chunk's data): ``_dechunk_scan`` reads those, and ``tests/wire/test_lean_framing.py``
    checks both give the same for every split of many bodies.

    The size lines are first compared with the pieces' lengths written as servers write them
    (lower-case hex, no leading zero: ``_HEX_OF``, a dict look-up per chunk instead of an
    ``int()`` call, a third of the cost); any other spelling is read by ``int``.

    The split's last part is what follows the last CRLF; with an even count, the last size
    line's data has no CRLF after it yet, so that pair stays in the buffer too. Returns the
    chunks' data (the last chunk's empty one left out) and whether the last chunk came."""
    parts = bytes(buffer).split(b"\r\n")  # bytes parts: cheaper to make, hashable
    count = len(parts)
    if count < 3:
        return [], False
    pairs = count - 1 if count % 2 else count - 2
    sizes = parts[0:pairs:2]
    pieces = parts[1:pairs:2]
    if list(map(_HEX_OF.__getitem__, map(len, pieces))) != sizes:
        try:
            if list(map(int, sizes, _HEX)) != list(map(len, pieces)):
                return None
        except ValueError:
            return None
    final = not pieces[-1]  # the last chunk: only ever the final pair, with no trailer line
    if final:
        del pieces[-1]
    if b"" in pieces:  # a last chunk with more after it
        return None
    rest = len(parts[-1]) if count % 2 else len(parts[-2]) + 2 + len(parts[-1])
    del buffer[: len(buffer) - rest]
    return pieces, final


class _HexOf(dict[int, bytes]):
    """``n -> b"%x" % n``, filled as lengths are seen (at most ``_HEX_KEPT`` of them)."""

    def __missing__(self, length: int) -> bytes:
        written = b"%x" % length
        if len(self) < _HEX_KEPT:
            self[length] = written
        return written


_HEX_OF = _HexOf()
_HEX_KEPT = 4096
_HEX = itertools.repeat(16)


def _dechunk_scan(buffer: bytearray) -> tuple[bytes, bool]:
    """Every framing, chunk by chunk: one pass with an offset and one deletion."""
    out: list[bytes] = []
    pos = 0
    final = False
    while (end := buffer.find(b"\r\n", pos)) >= 0:
        try:  # the plain size line inline (a chunk per SSE record); anything else below
            size = int(buffer[pos:end], 16)
        except ValueError:
            size = -1
        if size < 0:
            size = _chunk_size(buffer, pos, end)
        if size > MAX_CHUNK_BYTES:
            raise HTTPTransportError(
                f"the server announced a chunk of {size:,} bytes "
                f"(at most {MAX_CHUNK_BYTES:,} are read)"
            )
        if size == 0:
            tail = buffer.find(b"\r\n\r\n", end)  # after trailers, if any
            if tail >= 0:
                pos, final = tail + 4, True
            break
        start = end + 2
        if len(buffer) < start + size + 2:
            break
        if buffer[start + size : start + size + 2] != b"\r\n":
            # A size line that undercounts or overcounts its data: reading on would take the
            # data's own bytes for the next size line.
            raise HTTPTransportError(f"a chunk of {size} bytes is not followed by CRLF")
        out.append(bytes(buffer[start : start + size]))
        pos = start + size + 2
    if pos:
        del buffer[:pos]
    return b"".join(out), final


def _chunk_size(buffer: bytearray, pos: int, end: int) -> int:
    line = buffer[pos:end]
    try:
        size = int(line, 16)
    except ValueError:
        try:  # chunk extensions: ``SIZE;name=value``
            size = int(line.split(b";", 1)[0], 16)
        except ValueError:
            size = -1
    if size < 0:
        raise HTTPTransportError(f"bad chunk size line {bytes(line[:40])!r}")
    return size


def _parse_head(buffer: bytearray, *, eof: bool) -> tuple[int, dict[str, str]] | None:
    """The status and headers (names lower-cased) of a response head at the front of
    ``buffer``, taken off it; None while the head is not all in (``eof``: nothing more will
    come, an error then)."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        if len(buffer) > MAX_HEAD_BYTES:
            raise HTTPTransportError("the server sent a response head over 64 KiB")
        if eof:
            raise HTTPTransportError("the server closed the connection without a response")
        return None
    head = buffer[:end].decode("latin-1")
    del buffer[: end + 4]
    status_line, _, fields = head.partition("\r\n")
    status = _STATUS_LINES.get(status_line)
    if status is None:
        status = _status(status_line)
        if len(_STATUS_LINES) >= _HEADER_LINES_KEPT:
            _STATUS_LINES.clear()
        _STATUS_LINES[status_line] = status
    return status, _header_fields(fields) if fields else {}


def _status(status_line: str) -> int:
    version, _, rest = status_line.partition(" ")
    if version[:7] != "HTTP/1.":
        raise HTTPTransportError(f"not an HTTP/1.x response: {status_line[:80]!r}")
    try:
        return int(rest[:3])
    except ValueError:
        raise HTTPTransportError(f"bad status line: {status_line[:80]!r}") from None


_STATUS_LINES: dict[str, int] = {}
"""Status lines already read (``HTTP/1.1 200 OK``…) and their status: the same line reads the
same, and a server sends few different ones (a line that does not read is never kept)."""


def _header_fields(fields: str) -> dict[str, str]:
    """``Name: value`` lines as a dict: name and value stripped, the name lower-cased, a line
    without a colon a name with an empty value, the last of repeated names winning. (A loop:
    the same in ``map``/``zip`` passes measured 2-2.5 times slower for a usual head.)"""
    headers: dict[str, str] = {}
    for line in fields.split("\r\n"):
        parsed = _HEADER_LINES.get(line)
        if parsed is None:
            name, _, value = line.partition(":")
            parsed = name.strip().lower(), value.strip()
            if len(_HEADER_LINES) >= _HEADER_LINES_KEPT:
                _HEADER_LINES.clear()  # lines that never recur (ids, dates): start again
            _HEADER_LINES[line] = parsed
        headers[parsed[0]] = parsed[1]
    return headers


_HEADER_LINES: dict[str, tuple[str, str]] = {}
"""Header lines already read, and their name and value: a server sends most of its lines
byte for byte the same in every response (``content-type``, ``transfer-encoding``, ``server``
…), and the same line always reads the same (~0.9 k instructions a line, against a look-up)."""
_HEADER_LINES_KEPT = 512
