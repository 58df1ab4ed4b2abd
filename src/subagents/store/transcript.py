"""Append-only JSONL transcripts, one per agent.

Each line is one record: ``{"type": "message", "message": {...}}`` for a conversation message, or a
marker such as ``{"type": "turn_completed", "turn": N}``. Lines are buffered in memory during a turn
and written with one ``write`` when the turn ends (``flush``), which keeps durable transcripts cheap
on the hot path: a crash loses at most the turn in flight, which recovery treats as interrupted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from subagents.messages import Message
from subagents.state import ensure_private_dir

_OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
"""Compact JSON, one call per message (the C encoder; no per-call option handling)."""


class TranscriptWriter:
    """Appends records to one JSONL file (``0600``; a planted symlink makes the open fail)."""

    __slots__ = ("_fd", "_pending", "_turns", "path")

    def __init__(self, path: Path) -> None:
        ensure_private_dir(path.parent)
        self.path = path
        self._fd = os.open(path, _OPEN_FLAGS, 0o600)
        self._pending: list[str] = []
        self._turns = 0

    def append(self, message: Message) -> None:
        self._pending.append(f'{{"type":"message","message":{_encode(message)}}}')

    def record(self, entry: dict[str, Any]) -> None:
        self._pending.append(_encode(entry))

    def flush(self) -> None:
        """Write everything buffered with one system call, ending with a turn marker."""
        if not self._pending:
            return
        self._turns += 1
        self._pending.append(f'{{"type":"turn_completed","turn":{self._turns}}}')
        data = ("\n".join(self._pending) + "\n").encode()
        self._pending.clear()
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            os.close(self._fd)
            self._fd = -1


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Records of a transcript; a torn last line (crash mid-write) is skipped, others must parse."""
    with path.open(encoding="utf-8") as handle:
        lines = handle.readlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines) and not line.endswith("\n"):
                return
            raise ValueError(f"{path}:{number}: corrupt transcript line: {exc}") from exc


def read_messages(path: Path) -> list[Message]:
    """The conversation of a transcript, up to its last completed turn."""
    messages: list[Message] = []
    confirmed = 0
    for record in read_records(path):
        if record.get("type") == "message":
            messages.append(record["message"])
        elif record.get("type") == "turn_completed":
            confirmed = len(messages)
    return messages[:confirmed]
