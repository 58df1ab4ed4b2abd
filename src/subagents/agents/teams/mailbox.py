"""Durable mailboxes: one JSON line per message, appended under ``flock``; a cursor per reader.

The sender appends; the recipient's process reads the lines past its cursor and moves the cursor
only when its loop has delivered them, so a crash between reading and delivering re-delivers
(message ids keep a process from delivering one twice). How a message reads to its recipient is
``render``: a ``<teammate-message>`` element whose text has every runtime tag escaped.
"""

from __future__ import annotations

import html
import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from subagents.agents.notifications import escape_runtime_tags
from subagents.agents.teams.files import append_line, locked

STRUCTURED_TYPES = (
    "shutdown_request",
    "shutdown_response",
    "plan_approval_request",
    "plan_approval_response",
)
"""What an agent may send with SendMessage; the runtime alone writes ``idle_notification``,
``teammate_terminated`` and ``member_busy`` lines."""


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

    def cursor(self) -> int:
        try:
            return int(self._cursor_path.read_text().strip() or "0")
        except (FileNotFoundError, ValueError):
            return 0

    def unread(self) -> list[tuple[int, dict[str, Any]]]:
        """(line number, message) of every line past the cursor; a corrupt line is skipped."""
        try:
            lines = self.path.read_bytes().splitlines()
        except FileNotFoundError:
            return []
        found = []
        for number in range(self.cursor(), len(lines)):
            try:
                message = json.loads(lines[number])
            except ValueError:
                continue
            if isinstance(message, dict):
                found.append((number, message))
        return found

    def advance(self, line_number: int) -> None:
        """The lines up to ``line_number`` were delivered (the cursor never moves back)."""
        with locked(self.path.with_suffix(".lock")):
            if line_number + 1 > self.cursor():
                tmp = self._cursor_path.with_suffix(".read.tmp")
                tmp.write_text(str(line_number + 1))
                os.replace(tmp, self._cursor_path)


def render(message: dict[str, Any]) -> str:
    """A message as its recipient's model reads it."""
    text, _ = escape_runtime_tags(str(message.get("text", "")))
    attrs = [f'from="{_attr(message.get("from", ""))}"']
    for key in ("type", "request_id", "approve"):
        if key in message:
            value = message[key]
            value = str(value).lower() if isinstance(value, bool) else value
            attrs.append(f'{key}="{_attr(value)}"')
    if message.get("summary"):
        summary, _ = escape_runtime_tags(str(message["summary"]))
        attrs.append(f'summary="{_attr(summary)}"')
    return f"<teammate-message {' '.join(attrs)}>\n{text}\n</teammate-message>"


def _attr(value: Any) -> str:
    return html.escape(str(value), quote=True)
