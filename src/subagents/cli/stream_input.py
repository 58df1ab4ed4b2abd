"""stdin as a stream of JSON messages (``--input-format stream-json``).

A daemon thread reads lines (a blocking read cannot be cancelled, and a daemon never holds the
process open at exit) and hands each parsed object to the event loop. A line that is not a JSON
object, or is longer than ``MAX_LINE_BYTES``, is reported through ``on_bad_line`` and skipped:
one bad input never ends the session. End of input is ``None``.

The thread reads no further while the lines it handed over and the session has not taken add
up to ``max_pending_bytes`` (``MAX_PENDING_BYTES``) or number ``max_pending_lines``: a peer
that writes faster than the session acts (a flood of control requests) then waits on a full
pipe, instead of every line it sent being parked here as parsed objects (measured before:
317 MB resident for 300,000 control requests of 74 bytes; ``tests/test_stream_input_bounds.py``).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import IO, Any

MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longer lines are dropped (a prompt with images stays far below this)."""
MAX_PENDING_BYTES = 64 * 1024 * 1024
"""Lines read but not yet taken by the session, in bytes, before the reader waits (one line
longer than this still passes alone)."""
MAX_PENDING_LINES = 1024
"""... and in lines: a parsed line costs several times its bytes (a 74-byte control request
is ~700 bytes of dicts and strings), so many short ones are bounded by their number."""
_NOTICE_BYTES = 256
"""What a bad-line notice counts against the budget (its text is at most ~200 characters)."""

Message = dict[str, Any]


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
        try:
            while True:
                line = self._stream.readline(MAX_LINE_BYTES + 1)
                if not line:
                    break
                self._handle(line)
        except (OSError, ValueError) as exc:
            self._post_bad(f"stdin could not be read: {exc}")
        finally:
            self._post(None)

    def _handle(self, line: bytes) -> None:
        if len(line) > MAX_LINE_BYTES:
            # Skip the rest of this overlong line before reading the next one.
            while line and not line.endswith(b"\n"):
                line = self._stream.readline(MAX_LINE_BYTES)
            self._post_bad(f"input line longer than {MAX_LINE_BYTES} bytes, skipped")
            return
        text = line.strip()
        if not text:
            return
        try:
            message = json.loads(text)
        except (ValueError, RecursionError) as exc:
            self._post_bad(f"input line is not JSON ({exc}), skipped: {text[:120]!r}")
            return
        if not isinstance(message, dict):
            self._post_bad(f"input line is not a JSON object, skipped: {text[:120]!r}")
            return
        self._reserve(len(line))
        self._post((message, len(line)))

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
