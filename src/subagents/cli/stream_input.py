"""stdin as a stream of JSON messages (``--input-format stream-json``).

A daemon thread reads lines (a blocking read cannot be cancelled, and a daemon never holds the
process open at exit) and hands each parsed object to the event loop. A line that is not a JSON
object, is longer than ``MAX_LINE_BYTES`` or would parse into more than ``MAX_LINE_VALUES``
values is reported through ``on_bad_line`` (naming its line number and the limit) and skipped:
one bad input never ends the session. End of input is ``None``.

The values are counted in the line's bytes before it is parsed (``json_values``), because a
parsed value costs far more than its text: a 60 MB line ``[{},{},…]`` is 20 million dicts,
and parsing it took the process to 1.7 GB resident before it could be refused as not an object
(measured; now it is refused unparsed, ``tests/test_stream_input_bounds.py``).

The thread reads no further while the lines it handed over and the session has not taken add
up to ``max_pending_bytes`` (``MAX_PENDING_BYTES``) or number ``max_pending_lines``: a peer
that writes faster than the session acts (a flood of control requests) then waits on a full
pipe, instead of every line it sent being parked here as parsed objects (measured before:
317 MB resident for 300,000 control requests of 74 bytes; ``tests/test_stream_input_bounds.py``).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable
from typing import IO, Any

MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longer lines are dropped (a prompt with images stays far below this)."""
MAX_LINE_VALUES = 1_000_000
"""A line that would parse into more values (objects, arrays, keys, strings, numbers) is
dropped unparsed: ~85 MB of Python objects at most, where a user message of a thousand content
blocks is a few thousand values."""
VALUE_COST = 100
"""What one parsed value counts against the pending budget, in bytes (an empty dict parsed from
``{}`` is 85 bytes of memory, measured), so the budget holds for lines of many small values."""
MAX_PENDING_BYTES = 64 * 1024 * 1024
"""Lines read but not yet taken by the session, in bytes (each line's length plus
``VALUE_COST`` per value), before the reader waits (one line costing more than this still
passes alone)."""
MAX_PENDING_LINES = 1024
"""... and in lines: a parsed line costs several times its bytes (a 74-byte control request
is ~700 bytes of dicts and strings), so many short ones are bounded by their number."""
_PIECE_BYTES = 1 << 20
"""A long line is read in pieces of this size."""
_NOTICE_BYTES = 256
"""What a bad-line notice counts against the budget (its text is at most ~200 characters)."""

Message = dict[str, Any]

_SEPARATORS = (b"{", b"[", b",", b":")
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def json_values(line: bytes | bytearray, limit: int = MAX_LINE_VALUES) -> int:
    """How many values and keys, at most, the JSON text ``line`` parses into: one for the top
    and one for each ``{``, ``[``, ``,`` and ``:`` outside a string (every value or key inside a
    container follows one of those). Any count over ``limit`` means more than ``limit``.

    Counting every separator byte is one pass per byte value, and exact when no string holds
    one; a line over the limit that way has the separators inside its strings taken off (text
    with many commas is not refused for them), string by string in place (no copy of the
    line) until it is under, and at most ``limit`` of them (each string is a value): a hostile
    line costs a bounded time (about 2 s for a million strings, measured), never minutes."""
    count = sum(map(line.count, _SEPARATORS)) + 1
    if count <= limit:
        return count
    # Each string has two unescaped quotes; at most count(b'\\"') quotes are escaped ones.
    strings = (line.count(b'"') - line.count(b'\\"')) // 2
    if strings > limit:
        return strings
    for strings, match in enumerate(_STRING.finditer(line), 1):
        if strings > limit:  # each string is a value too
            return strings
        start, end = match.span()
        count -= sum(line.count(separator, start, end) for separator in _SEPARATORS)
        if count <= limit:
            break
    return count


class StreamInput:
    """Messages from a binary stream, one JSON object per line."""

    def __init__(
        self,
        stream: IO[bytes],
        on_bad_line: Callable[[str], None],
        *,
        max_pending_bytes: int = MAX_PENDING_BYTES,
        max_pending_lines: int = MAX_PENDING_LINES,
    ) -> None:
        self._stream = stream
        self._on_bad_line = on_bad_line
        self._queue: asyncio.Queue[tuple[Message, int] | None] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._max_pending = max_pending_bytes
        self._max_lines = max_pending_lines
        self._pending = 0
        self._pending_lines = 0
        self._room = threading.Condition()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        thread = threading.Thread(target=self._read, name="subagents-stdin", daemon=True)
        thread.start()

    async def next(self) -> Message | None:
        """The next message; None at end of input."""
        item = await self._queue.get()
        if item is None:
            return None
        message, size = item
        self._release(size)
        return message

    def _reserve(self, size: int) -> None:
        """In the reader thread: wait until ``size`` more bytes fit (always, when none wait)."""
        with self._room:
            while self._pending and (
                self._pending + size > self._max_pending or self._pending_lines >= self._max_lines
            ):
                self._room.wait()
            self._pending += size
            self._pending_lines += 1

    def _release(self, size: int) -> None:
        with self._room:
            self._pending -= size
            self._pending_lines -= 1
            self._room.notify()

    def _read(self) -> None:
        number = 0
        try:
            while True:
                line, whole = self._next_line()
                if not line:
                    break
                number += 1
                name = f"stdin line {number}"
                if whole:
                    self._handle(line, name)
                else:
                    self._post_bad(
                        f"{name} is longer than {MAX_LINE_BYTES} bytes (MAX_LINE_BYTES), skipped"
                    )
        except (OSError, ValueError) as exc:
            self._post_bad(f"stdin could not be read: {exc}")
        finally:
            self._post(None)

    def _next_line(self) -> tuple[bytearray, bool]:
        """The next line (empty at end of input), and False when it is longer than
        ``MAX_LINE_BYTES``: then its rest has been read and dropped, never held.

        Pieces appended to one buffer: ``readline`` of a long line holds its pieces and their
        join at once, twice the line (a 60 MB line was 120 MB more resident, measured)."""
        line = bytearray()
        while piece := self._stream.readline(_PIECE_BYTES):
            if len(line) + len(piece) > MAX_LINE_BYTES:  # so ``line`` is not empty
                while piece and not piece.endswith(b"\n"):
                    piece = self._stream.readline(_PIECE_BYTES)
                return line, False
            line += piece
            if piece.endswith(b"\n"):
                break
        return line, True

    def _handle(self, line: bytearray, name: str) -> None:
        if line.isspace():
            return
        # The line itself, never a stripped copy of it (the parser skips white space): a line
        # of many megabytes is held once.
        text = bytes(line[:120]).strip()
        values = json_values(line)
        if values > MAX_LINE_VALUES:
            self._post_bad(
                f"{name} holds more than {MAX_LINE_VALUES} JSON values (MAX_LINE_VALUES),"
                f" skipped unparsed: {text[:60]!r}"
            )
            return
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as exc:
            self._post_bad(f"{name} is not JSON ({exc}), skipped: {text!r}")
            return
        if not isinstance(message, dict):
            self._post_bad(f"{name} is not a JSON object, skipped: {text!r}")
            return
        cost = len(line) + VALUE_COST * values
        self._reserve(cost)
        self._post((message, cost))

    def _post(self, item: tuple[Message, int] | None) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:
            pass  # the loop is closed: the session is over

    def _post_bad(self, text: str) -> None:
        assert self._loop is not None
        self._reserve(_NOTICE_BYTES)  # a flood of bad lines is bounded too
        try:
            self._loop.call_soon_threadsafe(self._notify_bad, text)
        except RuntimeError:
            pass

    def _notify_bad(self, text: str) -> None:
        self._release(_NOTICE_BYTES)
        self._on_bad_line(text)
