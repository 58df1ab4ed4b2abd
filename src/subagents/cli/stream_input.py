"""stdin as a stream of JSON messages (``--input-format stream-json``).

A daemon thread reads lines (a blocking read cannot be cancelled, and a daemon never holds the
process open at exit) and hands each parsed object to the event loop. A line that is not a JSON
object, or is longer than ``MAX_LINE_BYTES``, is reported through ``on_bad_line`` and skipped:
one bad input never ends the session. End of input is ``None``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import IO, Any

MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longer lines are dropped (a prompt with images stays far below this)."""

Message = dict[str, Any]


class StreamInput:
    """Messages from a binary stream, one JSON object per line."""

    def __init__(self, stream: IO[bytes], on_bad_line: Callable[[str], None]) -> None:
        self._stream = stream
        self._on_bad_line = on_bad_line
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        thread = threading.Thread(target=self._read, name="subagents-stdin", daemon=True)
        thread.start()

    async def next(self) -> Message | None:
        """The next message; None at end of input."""
        return await self._queue.get()

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
        self._post(message)

    def _post(self, message: Message | None) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, message)
        except RuntimeError:
            pass  # the loop is closed: the session is over

    def _post_bad(self, text: str) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(self._on_bad_line, text)
        except RuntimeError:
            pass
