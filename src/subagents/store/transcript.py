"""Append-only JSONL transcripts, one per agent.

Each line is one record: ``{"type": "message", "message": {...}}`` for a conversation message, or a
marker such as ``{"type": "turn_completed", "turn": N}``. Lines are buffered in memory during a turn
and written with one ``write`` when the turn ends (``flush``), which keeps durable transcripts cheap
on the hot path: a crash loses at most the turn in flight, which recovery treats as interrupted.

Two records change the history instead of adding to it (context compaction, docs/compaction.md):
``{"type": "compaction", ...}`` — the messages after it *replace* everything before it — and
``{"type": "tool_results_cleared", "results": {tool_use_id: stub}}`` — those tool results' content
becomes the stub. Like messages, they count only once their turn's marker follows. Earlier lines
are never rewritten: the whole history stays in the file. ``TranscriptReplay`` is the one place
that applies them, for ``read_messages`` and for crash recovery (``agents.transcript_repair``).
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from subagents.descriptors import max_open_transcripts
from subagents.json_codec import dumps
from subagents.messages import ContentBlock, Message
from subagents.state import ensure_private_dir

_OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


_PRIVATE_FOLDERS: set[str] = set()
"""Folders this process already made private (``ensure_private_dir``) for a transcript."""


def _open_private(path: str | Path) -> int:
    """Open ``path`` for appending (``0600``, no symlink), its folder made private (``0700``).

    A session's children all write into one folder: after the first, the open itself shows
    whether the folder still exists, which saves each child a ``stat`` of it (and the hashing of
    a new ``Path``); a folder removed since is made again, as ``ensure_private_dir`` would.
    """
    name = os.fspath(path)
    cut = name.rfind("/")  # ``os.path.dirname`` without its Python call, for "<folder>/<name>"
    folder = name[:cut] if cut > 0 else os.path.dirname(name)
    if folder not in _PRIVATE_FOLDERS:
        ensure_private_dir(Path(folder))
        _PRIVATE_FOLDERS.add(folder)
        return os.open(name, _OPEN_FLAGS, 0o600)
    try:
        return os.open(name, _OPEN_FLAGS, 0o600)
    except FileNotFoundError:
        ensure_private_dir(Path(folder))
        return os.open(name, _OPEN_FLAGS, 0o600)


def _write_rest(fd: int, data: bytes, written: int) -> None:
    """After a short write of ``written`` bytes (rare): the rest, without copying the bytes."""
    view = memoryview(data)[written:]
    while view:
        view = view[os.write(fd, view) :]


_MESSAGE_HEAD = b'{"type":"message","message":'
"""A message line's bytes before the message (orjson's compact encoding of the record)."""

MARKERS_KEPT = 1024
"""Turn markers kept encoded (``_marker``): every agent's turns 1, 2, ... up to this many."""
_markers: dict[int, bytes] = {}
"""``_markers[n]`` is turn ``n``'s marker line, as ``flush`` writes it. A dict, not a list
filled in order: sessions may run on loops in several threads, and a dict item set for a turn
is that turn's whatever the interleaving (two threads appending to a list could both append
turn N, and every later turn would read the one before it)."""


def _marker(turn: int) -> bytes:
    """The marker line of ``turn``: ``{"type":"turn_completed","turn":N}`` and an LF. Every
    transcript writes turns 1, 2, 3, ..., so each is formatted once per process and kept (up
    to ``MARKERS_KEPT``): formatting the bytes costs ~960 instructions, a look-up ~80."""
    line = _markers.get(turn)
    if line is None:
        line = b'{"type":"turn_completed","turn":%d}\n' % turn
        if turn < MARKERS_KEPT:
            _markers[turn] = line
    return line


_open_writers: OrderedDict[int, TranscriptWriter] = OrderedDict()
"""Writers holding an open descriptor, least recently written first (by ``id``)."""


def _hold_open(writer: TranscriptWriter) -> None:
    """Count ``writer``'s descriptor as most recently used; close the oldest past the limit."""
    key = writer._key
    if key in _open_writers:
        _open_writers.move_to_end(key)
        return
    _open_writers[key] = writer
    while len(_open_writers) > max_open_transcripts():
        _, oldest = _open_writers.popitem(last=False)
        oldest._release()


class TranscriptWriter:
    """Appends records to one JSONL file (``0600``; a planted symlink makes the open fail)."""

    __slots__ = ("_closed", "_fd", "_key", "_pending", "_turns", "path")

    def __init__(self, path: str | Path) -> None:
        """``path``: a ``Path`` or its text (a child's comes as text: ``AgentJob.transcript``)."""
        self.path = path
        self._key = id(self)
        """Its key in ``_open_writers``."""
        self._fd = _open_private(path)
        self._closed = False
        self._pending: list[bytes] = []
        self._turns = 0
        _hold_open(self)

    def append(self, message: Message) -> None:
        # ``{"type": "message", "message": message}`` as orjson encodes that dict: the record's
        # head as constant bytes, then the message by one orjson call (no dict per line: ~200
        # instructions); what orjson refuses goes through ``json_codec.dumps`` of the record,
        # the same bytes (``test_a_transcript_line_is_its_record_encoded_whole``).
        try:
            self._pending.append(_MESSAGE_HEAD + orjson.dumps(message) + b"}")
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            self._pending.append(dumps({"type": "message", "message": message}))

    def record(self, entry: dict[str, Any]) -> None:
        self._pending.append(dumps(entry))

    def flush(self) -> None:
        """Write everything buffered with one system call, ending with a turn marker."""
        if not self._pending:
            return
        if self._closed:
            raise ValueError(f"{self.path}: transcript writer is closed")
        turn = self._turns = self._turns + 1
        pending = self._pending
        marker = _markers.get(turn)
        pending.append(marker if marker is not None else _marker(turn))
        data = b"\n".join(pending)  # one copy of the turn's lines, however long its results
        self._pending = []
        if self._fd < 0:  # closed to stay within the descriptor budget: open it again
            self._fd = _open_private(self.path)
        try:  # ``_hold_open`` of a writer already counted (every flush but its first): inlined
            _open_writers.move_to_end(self._key)
        except KeyError:
            _hold_open(self)
        written = os.write(self._fd, data)
        if written < len(data):
            _write_rest(self._fd, data, written)

    def close(self) -> None:
        if self._closed:
            return
        self.flush()
        self._closed = True
        _open_writers.pop(self._key, None)
        self._release()

    def _release(self) -> None:
        """Close the descriptor (the writer stays usable: ``flush`` reopens it)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Records of a transcript; a torn last line (crash mid-write) is skipped, others must parse.
    Lines are decoded one by one: a torn line may end inside a character (``UnicodeDecodeError``
    of the whole file, read as text, ended the read of every line before it)."""
    with path.open("rb") as handle:
        lines = handle.readlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield json.loads(line.decode("utf-8"))  # (not bytes: those may be read as UTF-16)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            if number == len(lines) and not line.endswith(b"\n"):
                return
            raise ValueError(f"{path}:{number}: corrupt transcript line: {exc}") from exc


MARKER_TYPE = "turn_completed"
COMPACTION_TYPE = "compaction"
CLEARED_TYPE = "tool_results_cleared"


class TranscriptReplay:
    """Rebuilds a conversation from transcript records fed in file order (see the module
    docstring): messages, compaction boundaries and clearings take effect when their turn is
    confirmed by a marker; what follows the last marker is the unconfirmed turn."""

    __slots__ = ("_turn", "durable", "markers", "replaced")

    def __init__(self) -> None:
        self.durable: list[Message] = []
        """The confirmed history, boundaries and clearings applied."""
        self.replaced: list[Message] = []
        """Confirmed messages a compaction boundary took out of the history, oldest first."""
        self.markers = 0
        self._turn: list[dict[str, Any]] = []

    def feed(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind == MARKER_TYPE:
            self._confirm()
        elif kind in ("message", COMPACTION_TYPE, CLEARED_TYPE):
            self._turn.append(record)

    @property
    def unconfirmed(self) -> list[Message]:
        """Messages after the last marker: the turn a crash cut off."""
        return [r["message"] for r in self._turn if r.get("type") == "message"]

    @property
    def compacted(self) -> bool:
        return bool(self.replaced)

    def _confirm(self) -> None:
        self.markers += 1
        for record in self._turn:
            kind = record.get("type")
            if kind == "message":
                self.durable.append(record["message"])
            elif kind == COMPACTION_TYPE:
                self.replaced += self.durable
                self.durable = []
            else:
                stubs = record.get("results")
                if isinstance(stubs, dict) and stubs:
                    self.durable = clear_results(self.durable, stubs)
        self._turn = []


def clear_results(messages: list[Message], stubs: dict[str, Any]) -> list[Message]:
    """``messages`` with the content of the tool results named in ``stubs`` replaced by their
    stub. Changed messages are new objects: the originals may be shared (a fork's history)."""
    out: list[Message] = []
    for message in messages:
        content = message["content"]
        if message["role"] != "user" or isinstance(content, str):
            out.append(message)
            continue
        blocks: list[ContentBlock] = []
        changed = False
        for block in content:
            if block["type"] == "tool_result" and block["tool_use_id"] in stubs:
                stub = str(stubs[block["tool_use_id"]])
                blocks.append({**block, "content": stub})
                changed = True
            else:
                blocks.append(block)
        out.append({"role": "user", "content": blocks} if changed else message)
    return out


def read_messages(path: Path) -> list[Message]:
    """The conversation of a transcript, up to its last completed turn (a compaction boundary
    replaces what came before it)."""
    replay = TranscriptReplay()
    for record in read_records(path):
        replay.feed(record)
    return replay.durable
