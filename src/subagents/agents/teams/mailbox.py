"""Durable mailboxes: one JSON line per message, appended under ``flock``; a cursor per reader.

The sender appends; the recipient's process reads the lines past its cursor and moves the cursor
only when its loop has delivered them, so a crash between reading and delivering re-delivers
(message ids keep a process from delivering one twice). How a message reads to its recipient is
``render``: a ``<teammate-message>`` element whose text has every runtime tag escaped, capped at
``MAX_TEXT_CHARS``.

Reading is hostile-input safe, since any process of the user (or a teammate's Bash) can write
the file: the mailbox is opened without following a symlink and without blocking, and anything
but a regular file (a FIFO, ``/dev/zero``) is refused; each check reads only what was appended
since the last one (a byte offset kept in memory: a long session's mailbox is not re-read per
message), at most ``MAX_READ_BYTES`` per check; a line that is not a JSON object — corrupt,
nested past the parser's depth, longer than ``MAX_LINE_BYTES`` — is skipped with a warning and
the lines after it are delivered; a line still being written (no newline yet) waits.
"""

from __future__ import annotations

import errno
import html
import json
import logging
import os
import stat
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagents.agents.notifications import cap, escape_runtime_tags
from subagents.agents.teams.files import TeamError, append_line, locked

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 1 << 20
"""A longer line is not a message any member wrote through SendMessage: skipped."""
MAX_READ_BYTES = 8 << 20
"""Read per check at most; the rest waits for the next check (a flood cannot stall the loop)."""
MAX_TEXT_CHARS = 100_000
"""What a recipient's model reads of one message at most."""
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

STRUCTURED_TYPES = (
    "shutdown_request",
    "shutdown_response",
    "plan_approval_request",
    "plan_approval_response",
)
"""What an agent may send with SendMessage; the runtime alone writes ``idle_notification``,
``teammate_terminated``, ``member_busy``, ``permission_request`` and ``permission_response``
lines (a JSON text of another type is sent as plain text)."""


def new_message(sender: str, to: str, text: str, **fields: Any) -> dict[str, Any]:
    message: dict[str, Any] = {
        "id": f"msg-{uuid.uuid4().hex}",
        "from": sender,
        "to": to,
        "text": text,
    }
    message.update({k: v for k, v in fields.items() if v is not None})
    message["ts"] = int(time.time() * 1000)
    return message


@dataclass
class Mailbox:
    """One member's mailbox file and its cursor (lines already taken)."""

    path: Path
    _offset: int = field(default=0, repr=False)
    """Bytes of the file already scanned (in this process), and the lines in them."""
    _lines: int = field(default=0, repr=False)

    @property
    def _cursor_path(self) -> Path:
        return self.path.with_suffix(".read")

    def put(self, message: dict[str, Any]) -> None:
        append_line(self.path, message)

    def size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0

    @property
    def scanned(self) -> int:
        """Bytes of the mailbox this process has read (complete lines only)."""
        return self._offset

    def cursor(self) -> int:
        try:
            fd = os.open(self._cursor_path, _READ_FLAGS)
        except OSError:  # missing, or a symlink: start from the first line (re-delivery is safe)
            return 0
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return 0
            return int(os.read(fd, 32).strip() or b"0")
        except (OSError, ValueError):
            return 0
        finally:
            os.close(fd)

    def unread(self) -> list[tuple[int, dict[str, Any]]]:
        """(line number, message) of each new line past the cursor: lines appended since the
        last call (the first call scans from the start); a bad line is skipped with a warning.
        Raises ``TeamError`` when the mailbox is not a regular file."""
        data = self._read_new()
        cursor = self.cursor()
        found = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            number = self._lines
            self._lines += 1
            line, start = data[start:end], end + 1
            if number >= cursor and (message := self._parse(number, line)) is not None:
                found.append((number, message))
        self._offset += start  # a last line without its newline is read again when complete
        return found

    def _read_new(self) -> bytes:
        try:
            fd = os.open(self.path, _READ_FLAGS)
        except FileNotFoundError:
            return b""
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise TeamError(f"{self.path}: the mailbox is a symlink; not reading it") from exc
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise TeamError(f"{self.path}: the mailbox is not a regular file; not reading it")
            if info.st_size < self._offset:  # replaced by a shorter file: start again
                self._offset = self._lines = 0
            return os.pread(fd, min(info.st_size - self._offset, MAX_READ_BYTES), self._offset)
        finally:
            os.close(fd)

    def _parse(self, number: int, line: bytes) -> dict[str, Any] | None:
        if len(line) > MAX_LINE_BYTES:
            log.warning("%s line %d: %d bytes, skipped", self.path, number + 1, len(line))
            return None
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            log.warning("%s line %d: not JSON, skipped", self.path, number + 1)
            return None
        if not isinstance(message, dict):
            log.warning("%s line %d: not a JSON object, skipped", self.path, number + 1)
            return None
        return message

    def advance(self, line_number: int) -> None:
        """The lines up to ``line_number`` were delivered (the cursor never moves back)."""
        with locked(self.path.with_suffix(".lock")):
            if line_number + 1 > self.cursor():
                tmp = self._cursor_path.with_suffix(".read.tmp")
                tmp.write_text(str(line_number + 1))
                os.replace(tmp, self._cursor_path)


def render(message: dict[str, Any]) -> str:
    """A message as its recipient's model reads it."""
    text, _ = escape_runtime_tags(cap(str(message.get("text", "")), MAX_TEXT_CHARS, None))
    attrs = [f'from="{_attr(message.get("from", ""))}"']
    for key in ("type", "request_id", "approve"):
        if key in message:
            value = message[key]
            value = str(value).lower() if isinstance(value, bool) else value
            attrs.append(f'{key}="{_attr(value)}"')
    if message.get("summary"):
        summary, _ = escape_runtime_tags(cap(str(message["summary"]), 500, None))
        attrs.append(f'summary="{_attr(summary)}"')
    return f"<teammate-message {' '.join(attrs)}>\n{text}\n</teammate-message>"


def _attr(value: Any) -> str:
    return html.escape(str(value), quote=True)
