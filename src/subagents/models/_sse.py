"""Server-sent events from a byte stream, as both provider APIs send them.

A record is a run of lines ended by a blank line; ``event:`` names it, ``data:`` lines are its
payload (joined by newlines), other fields and ``:`` comments are ignored, and a record without
data, or without its blank line at the end of the stream, is not dispatched (the WHATWG rules
the SDKs' decoders follow). Lines may end in LF, CRLF
or CR. Decoding works on whole network reads, not line by line: one ``split`` per read finds
every complete record, which is most of why this path is cheap.
"""

from __future__ import annotations

import re
from itertools import chain, repeat
from operator import itemgetter

SSEEvent = tuple[str | None, bytes]
"""``(event name or None, data)``."""


class SSEDecoder:
    """Feed it body bytes as they arrive; it returns the records completed so far."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> list[SSEEvent]:
        buffer = self._joined(data)
        last = buffer.rfind(b"\n\n")
        if last < 0:
            self._pending = buffer
            return []
        end = last + 2
        events = _uniform(buffer, end)
        if events is None:
            return self._split(buffer)
        self._pending = buffer[end:]
        return events

    def split_feed(self, data: bytes) -> list[SSEEvent]:
        """``feed`` through the record loop alone (what tests compare ``feed`` against)."""
        return self._split(self._joined(data))

    def _joined(self, data: bytes) -> bytes:
        """What is pending plus ``data``, line ends made LF."""
        buffer = self._pending + data if self._pending else data
        if buffer.find(b"\r") >= 0:
            # A CR at the very end may be the first half of a CRLF split across reads.
            held = buffer[-1:] == b"\r"
            if held:
                buffer = buffer[:-1]
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if held:
                buffer += b"\r"
        return buffer

    def _split(self, buffer: bytes) -> list[SSEEvent]:
        records = buffer.split(b"\n\n")
        self._pending = records.pop()
        events: list[SSEEvent] = []
        for record in records:
            if record[:6] == b"data: " and record.find(b"\n") < 0:  # OpenAI's shape, inline
                events.append((None, record[6:]))
            elif (event := _parse(record)) is not None:
                events.append(event)
        return events

    def flush(self) -> list[SSEEvent]:
        """The records the end of the stream completes. A CR held back as maybe the first half
        of a CRLF ends its line after all; a last record without its blank line is dropped, as
        the SDKs' decoders (and WHATWG) drop it."""
        pending, self._pending = self._pending, b""
        if pending[-1:] != b"\r":
            return []
        events = self._split(pending[:-1] + b"\n")
        self._pending = b""
        return events


_NAMED = re.compile(rb"event: ([^\n]*)\ndata: ([^\n]*)\n\n")
_UNNAMED = re.compile(rb"data: ([^\n]*)\n\n")


def _uniform(buffer: bytes, end: int) -> list[SSEEvent] | None:
    """``buffer[:end]`` when every record in it has the shape its API always sends — one
    ``event:`` and one ``data:`` line (Anthropic), or one ``data:`` line (OpenAI) — read by one
    regular-expression pass and a few C-level ones, with no Python step per record; None when
    it is anything else. ``findall`` skips what does not match, so the matches' lengths must
    add up to ``end``: then the records are exactly the matches (a match holds one blank line,
    at its end, after a character that is not a newline, so ``end`` is also where ``split``
    ends its last record), and each gives what ``_parse`` would."""
    if buffer[:7] == b"event: ":
        pairs: list[tuple[bytes, bytes]] = _NAMED.findall(buffer, 0, end)
        if sum(map(len, chain.from_iterable(pairs))) + 16 * len(pairs) != end:
            return None
        names = list(map(_NAMES.get, map(_FIRST, pairs)))
        if None in names:  # a name these APIs do not send: decoded by the general path
            return None
        return list(zip(names, map(_SECOND, pairs), strict=True))
    datas: list[bytes] = _UNNAMED.findall(buffer, 0, end)
    if sum(map(len, datas)) + 8 * len(datas) != end:
        return None
    return list(zip(repeat(None), datas))


_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


# Python 3.11's ``bytes.startswith`` parses its arguments through a format string and
# ``x in bytes`` raises and clears a TypeError inside: each costs several times a slice
# comparison, and this runs for every record of every stream, so slices and ``find`` it is.


def _parse(record: bytes) -> SSEEvent | None:
    # The shapes both APIs send, one ``event:`` line then one ``data:`` line (Anthropic) or a
    # lone ``data:`` line (OpenAI), are sliced directly; anything else takes the general path.
    if record[:7] == b"event: ":
        newline = record.find(b"\n")
        if record[newline + 1 : newline + 7] == b"data: " and record.find(b"\n", newline + 1) < 0:
            raw_name = record[7:newline]
            name = _NAMES.get(raw_name) or raw_name.decode("utf-8", "replace")
            return name, record[newline + 7 :]
    elif record[:6] == b"data: " and record.find(b"\n") < 0:
        return None, record[6:]
    return _parse_fields(record)


_NAMES = {
    name.encode(): name
    for name in (
        "content_block_delta",
        "content_block_start",
        "content_block_stop",
        "message_start",
        "message_delta",
        "message_stop",
        "ping",
        "error",
    )
}


def _parse_fields(record: bytes) -> SSEEvent | None:
    name: str | None = None
    data: list[bytes] = []
    for line in record.split(b"\n"):
        if line.startswith(b"data"):
            field, value = _field(line)
            if field == b"data":
                data.append(value)
        elif line.startswith(b"event"):
            field, value = _field(line)
            if field == b"event":
                name = value.decode("utf-8", "replace")
    if not data:
        return None
    return name, data[0] if len(data) == 1 else b"\n".join(data)


def _field(line: bytes) -> tuple[bytes, bytes]:
    field, colon, value = line.partition(b":")
    if not colon:
        return field, b""
    return field, value[1:] if value.startswith(b" ") else value
