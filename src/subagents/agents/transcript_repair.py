"""Reading a transcript after a crash, and cutting it back to what is durable.

``TranscriptWriter`` writes a turn's lines with one ``write`` that ends with a
``{"type": "turn_completed"}`` marker. A SIGKILL can stop the runtime anywhere, so a transcript
found after a crash has three parts:

* the durable history — every line up to and including the last marker;
* the interrupted turn — complete lines after that marker, never confirmed;
* possibly a torn last line — a write cut short.

``inspect_transcript`` tells them apart without changing anything. ``cut_to_durable`` truncates
the file right after its last marker, so a process appending to it later (a resumed session, the
repair of a child's interrupted turn) never glues its lines onto a torn one or confirms messages
of a turn that never finished. A corrupt line *before* the last marker is not a crash artefact —
something damaged the file — and makes the history unverifiable.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagents.messages import Message
from subagents.store.transcript import MARKER_TYPE, TranscriptReplay


class UnverifiableTranscript(Exception):
    """The transcript cannot be trusted: a corrupt line before the end, or foreign content."""


@dataclass(kw_only=True)
class TranscriptState:
    """What a transcript holds after a crash (see the module docstring)."""

    exists: bool
    durable: list[Message] = field(default_factory=list)
    """Messages up to the last turn marker."""
    markers: int = 0
    durable_bytes: int = 0
    """File offset just after the last marker line (0 when there is none)."""
    interrupted: list[Message] = field(default_factory=list)
    """Complete messages after the last marker: the turn a crash cut off."""
    torn_tail: bool = False
    """The last line is incomplete: cut short, or complete but missing its newline."""
    replaced: list[Message] = field(default_factory=list)
    """Durable messages that a compaction boundary replaced (the file's earlier history)."""

    @property
    def opening(self) -> list[Message]:
        """The history as the file began it: before any compaction boundary."""
        return self.replaced or self.durable


def inspect_transcript(path: Path) -> TranscriptState:
    """Split ``path`` into durable history, interrupted turn and torn tail; no writes.

    Compaction boundaries and clearings are applied as ``read_messages`` applies them
    (``store.transcript.TranscriptReplay``). Raises ``UnverifiableTranscript`` (naming the file
    and line) for a corrupt line that is not the last one, or a line that is not a transcript
    record.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return TranscriptState(exists=False)
    state = TranscriptState(exists=True)
    replay = TranscriptReplay()
    offset = 0
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        end = offset + len(raw) + 1
        last = number == len(lines)
        if raw.strip():
            record = _parse(path, number, raw, torn_ok=last)
            state.torn_tail = last  # the last line lacks its newline, parsed or not
            if record is not None:
                replay.feed(record)
                if record.get("type") == MARKER_TYPE:
                    state.durable_bytes = end
        offset = end
    state.durable = replay.durable
    state.replaced = replay.replaced
    state.markers = replay.markers
    state.interrupted = replay.unconfirmed
    return state


def _parse(path: Path, number: int, raw: bytes, *, torn_ok: bool) -> dict[str, Any] | None:
    """One record; None for a torn last line (written without its newline)."""
    try:
        record = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        if torn_ok:
            return None
        raise UnverifiableTranscript(f"{path}:{number}: corrupt transcript line: {exc}") from exc
    if not isinstance(record, dict):
        raise UnverifiableTranscript(f"{path}:{number}: not a transcript record")
    if record.get("type") == "message" and not _is_message(record.get("message")):
        raise UnverifiableTranscript(f"{path}:{number}: message record without a valid message")
    return record


def _is_message(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("role") in ("user", "assistant")
        and isinstance(value.get("content"), str | list)
    )


def cut_to_durable(path: Path, state: TranscriptState) -> None:
    """Drop the interrupted turn and any torn line: truncate after the last marker."""
    if not state.exists or (not state.interrupted and not state.torn_tail):
        return
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        os.ftruncate(fd, min(state.durable_bytes, size))
        if state.durable_bytes > size:  # the marker itself lacked its newline
            os.pwrite(fd, b"\n", size)
        os.fsync(fd)
    finally:
        os.close(fd)


def append_turn(path: Path, messages: list[Message], *, turn: int) -> None:
    """Append ``messages`` and a turn marker with one write (as ``TranscriptWriter`` does)."""
    lines = [json.dumps({"type": "message", "message": m}) for m in messages]
    lines.append(json.dumps({"type": MARKER_TYPE, "turn": turn}))
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    try:
        os.write(fd, ("\n".join(lines) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
