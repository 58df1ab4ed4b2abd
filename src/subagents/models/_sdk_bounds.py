"""The official SDK transport, bounded as the lean one is: what a server can make it hold.

The SDKs' SSE decoders (``anthropic._streaming.SSEDecoder._aiter_chunks``; openai's is the
same code) append every line to one buffer until a blank line ends the record, copying the
buffer for each line: a server that never sends the blank line grows it without end, in
quadratic time (an endless 64 MB ``data:`` line was still being read after 60 s, at 282 MB
resident and growing; measured, ``tests/wire/test_lean_bounds.py``). They read an error
response's body whole, however long it is or never ends.

So the SDK client we build is the SDK's own default one (``DefaultAsyncHttpxClient``: its
timeouts, pool, keep-alive socket options and proxies) with a response hook that puts each
body behind ``BoundedBody``, holding the lean transport's bounds with its words:

* a 2xx body (the event stream) fails as a dropped connection once a record has gone on past
  ``_sse.MAX_RECORD_BYTES`` without ending ("the server sent an event of over 16,777,216
  bytes without ending it");
* any other body (an error response, a redirect) is cut after ``MAX_ERROR_BODY_BYTES``, as
  ``_http.Response.read`` cuts it.

The bounds count the bytes as they came, so compression would undo them (a gzip stream of a
few kilobytes inflates to gigabytes): the client asks for no coding (``Accept-Encoding:
identity``, what the lean transport gets by asking for none it cannot read), and a body sent
coded anyway fails before a byte of it is read. A client handed to a model (``client=``) is
the caller's and is used as it is.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

from subagents.models._sse import MAX_RECORD_BYTES

MAX_RECORD_LINES = 100
"""The lines of a record not yet ended: the SDK decoder copies all it holds of the record for
each line, so a server sending short lines and no blank line would cost it quadratic time
within the byte bound (16 MiB in 8-byte lines: days). 100 lines past a held 16 MiB are 1.6 GB
of copying, under a second; the APIs' records have two lines (``event:``, ``data:``)."""
MAX_ERROR_BODY_BYTES = 1 << 20
"""What is read of a body that is not an event stream (``_http.Response.read``'s limit)."""

_CR_RECORD_END = re.compile(rb"\r\r(?!\n)")
"""A blank line of CRs, as the SDK decoder ends a record on one: the second CR ends a line of
its own only when no LF follows it in the same network read (``bytes.splitlines``)."""


class BodyBoundError(Exception):
    """A bound of this module was passed; the SDK raises it wrapped in its connection error
    (``bound_passed`` finds it, so the call's error says what the lean transport says)."""


def bound_passed(error: BaseException) -> BodyBoundError | None:
    """The ``BodyBoundError`` behind ``error`` (its causes), if any."""
    seen: BaseException | None = error
    for _ in range(8):  # a chain is a few links; never loop on a cycle
        if seen is None or isinstance(seen, BodyBoundError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def bounded_http_client(sdk: ModuleType) -> Any:
    """``sdk``'s default async HTTP client, its bodies bounded (module docstring)."""
    client_class = sdk.DefaultAsyncHttpxClient
    body_class = _bounded_body_class(_http_library(client_class))

    async def bound(response: Any) -> None:
        response.stream = body_class(response)

    return client_class(headers={"Accept-Encoding": "identity"}, event_hooks={"response": [bound]})


def _http_library(client_class: type) -> ModuleType:
    """The HTTP library a client class is built on (``httpx``, or ``httpx2`` in the SDKs since
    anthropic 2.17): its byte stream and error classes are the ones that client accepts."""
    for base in client_class.__mro__:
        root = base.__module__.partition(".")[0]
        if root in ("httpx", "httpx2"):
            return importlib.import_module(root)
    raise TypeError(f"{client_class.__qualname__} is not an httpx client")


@dataclass(kw_only=True, slots=True)
class OpenRecord:
    """What the SDK decoder holds of a record not yet ended, from the bytes it is fed: its
    bytes and lines, give or take the few bytes of a blank line split across reads.

    The decoder ends a record after a line that leaves its buffer ending in ``\n\n``,
    ``\r\n\r\n`` or ``\r\r``; the first two end one wherever they stand, the last only
    where the second CR ends its line (``_CR_RECORD_END``)."""

    held: int = 0
    lines: int = 0
    tail: bytes = b""
    """The last three bytes fed: a blank line may be split across reads."""

    def feed(self, data: bytes) -> str | None:
        """Take ``data``; what is wrong once a bound is passed, else None."""
        window = self.tail + data
        ends = [at + len(end) for end in (b"\n\n", b"\r\n\r\n") if (at := window.rfind(end)) >= 0]
        if window.find(b"\r\r") >= 0:
            ends += [match.end() for match in _CR_RECORD_END.finditer(window)][-1:]
        if ends:
            start = max(ends)
            self.held, self.lines = len(window) - start, _line_ends(window, start)
        else:
            self.held, self.lines = self.held + len(data), self.lines + _line_ends(data, 0)
        self.tail = data[-3:] if len(data) >= 3 else window[-3:]
        if self.held > MAX_RECORD_BYTES:
            return f"the server sent an event of over {MAX_RECORD_BYTES:,} bytes without ending it"
        if self.lines > MAX_RECORD_LINES:
            return f"the server sent an event of over {MAX_RECORD_LINES} lines without ending it"
        return None


def _line_ends(data: bytes, start: int) -> int:
    """The line ends in ``data[start:]`` (a CRLF is one)."""
    return data.count(b"\n", start) + data.count(b"\r", start) - data.count(b"\r\n", start)


@cache
def _bounded_body_class(http: ModuleType) -> type:
    """``BoundedBody`` as a byte stream of ``http`` (whose clients accept no other kind)."""

    class BoundError(http.ReadError, BodyBoundError):  # type: ignore[misc,name-defined]
        """A read error to the SDK (which reports it as a dropped connection)."""

    def bound_error(text: str) -> BaseException:
        return BoundError(text)

    class BoundedBody(http.AsyncByteStream):  # type: ignore[misc,name-defined]
        """A response's body, bounded (module docstring); closing it closes the original."""

        def __init__(self, response: Any) -> None:
            self._response = response
            self._stream = response.stream

        async def __aiter__(self) -> AsyncIterator[bytes]:
            coding = self._response.headers.get("content-encoding", "identity")
            if coding.strip().lower() not in ("", "identity"):
                raise bound_error(
                    f"the server sent a body in content-encoding {coding[:40]!r},"
                    " which was not asked for"
                )
            pieces = self._events() if 200 <= self._response.status_code < 300 else self._error()
            async for piece in pieces:
                yield piece

        async def _events(self) -> AsyncIterator[bytes]:
            record = OpenRecord()
            async for piece in self._stream:
                if (wrong := record.feed(piece)) is not None:
                    raise bound_error(wrong)
                yield piece

        async def _error(self) -> AsyncIterator[bytes]:
            left = MAX_ERROR_BODY_BYTES
            async for piece in self._stream:
                yield piece[:left]
                left -= len(piece)
                if left <= 0:
                    return

        async def aclose(self) -> None:
            await self._stream.aclose()

    return BoundedBody
