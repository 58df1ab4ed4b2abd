"""Server-sent events from a byte stream, as both provider APIs send them.

A record is a run of lines ended by a blank line; ``event:`` names it, ``data:`` lines are its
payload (joined by newlines), other fields and ``:`` comments are ignored, and a record without
data, or without its blank line at the end of the stream, is not dispatched (the WHATWG rules
the SDKs' decoders follow). Lines may end in LF, CRLF or CR. Decoding works on whole network
reads, not line by line: one ``split`` per read finds every complete record, which is most of
why this path is cheap; the assemblers then read the APIs' commonest records straight from
their bytes (``anthropic.StreamAssembler.feed_records``) and parse the others here. When the
HTTP chunks of a read each end their records (both APIs send one record per chunk), the
assemblers take the chunks as they came (``feed_pieces``) and no split is made at all:
``piece_records`` and ``piece_event`` read a chunk as the decoder would, or say it cannot.
"""

from __future__ import annotations

from subagents.models._http import HTTPTransportError

SSEEvent = tuple[str | None, bytes]
"""``(event name or None, data)``."""

MAX_RECORD_BYTES = 16 * 1024 * 1024
"""The longest record held while it has not ended: a server that never sends the blank line
would otherwise grow the pending bytes without end (and copy them on every read). Either API's
records are kilobytes; a whole tool call's arguments in one delta, a few hundred."""


class SSEDecoder:
    """Feed it body bytes as they arrive; it returns the records completed so far: raw
    (``records``: each record's bytes without its blank line, line ends made LF, for an
    assembler that reads the APIs' usual shapes itself) or parsed (``feed``)."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def resumes(self) -> bool:
        """Whether the next byte begins a record: nothing of one is pending (``piece_records``
        may then read pieces that end their records without this decoder)."""
        return not self._pending

    def records(self, data: bytes) -> list[bytes]:
        """The records ``data`` completes (one ``split``; what follows the last is kept)."""
        records = self._joined(data).split(b"\n\n")
        pending = self._pending = records.pop()
        if len(pending) > MAX_RECORD_BYTES:
            raise HTTPTransportError(
                f"the server sent an event of over {MAX_RECORD_BYTES:,} bytes without ending it"
            )
        return records

    def feed(self, data: bytes) -> list[SSEEvent]:
        """``records``, each parsed (``parse_record``); records without data are left out."""
        return parsed(self.records(data))

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

    def flush_records(self) -> list[bytes]:
        """The records the end of the stream completes. A CR held back as maybe the first half
        of a CRLF ends its line after all; a last record without its blank line is dropped, as
        the SDKs' decoders (and WHATWG) drop it."""
        pending, self._pending = self._pending, b""
        if pending[-1:] != b"\r":
            return []
        records = (pending[:-1] + b"\n").split(b"\n\n")
        records.pop()
        return records

    def flush(self) -> list[SSEEvent]:
        """``flush_records``, each parsed."""
        return parsed(self.flush_records())


def piece_records(piece: bytes) -> list[bytes] | None:
    """The records of ``piece`` (the data of one HTTP chunk, say) as ``SSEDecoder.records``
    gives them when the decoder ``resumes()`` at the piece's start, and then resumes at its
    end; None when it would not resume there (the piece does not end its last record), and
    the decoder must read on from the piece's start.

    Why this is the decoder's reading. The decoder makes line ends LF (``\r\n`` and a lone
    ``\r``) over the whole read, then splits at every ``\n\n``, left to right. If the piece
    ends with an LF, no CRLF spans its end, nor its start (the piece before ended with an LF
    too, or nothing came before), so making its line ends LF alone gives the same bytes. If
    that ends with ``\n\n`` not preceded by a third LF, the split finds its matches inside
    ``piece[:-2]`` exactly as ``piece[:-2].split`` does (a match starting earlier lies within
    it; none can start at ``len - 3``), then the final ``\n\n``, and resumes right after the
    piece with nothing pending. Anything else — no blank line at the end (a record that goes
    on in the next chunk), a third LF, a CR last — is left to the decoder."""
    if piece.find(b"\r") >= 0:
        if piece[-1:] != b"\n":
            return None
        piece = piece.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if piece[-2:] != b"\n\n" or piece[-3:-2] == b"\n":
        return None
    return piece[:-2].split(b"\n\n")


def piece_event(piece: bytes) -> SSEEvent | None:
    """``parse_record`` of a piece that is one record of the Messages API's shape and its
    blank line — a known ``event:`` line, one ``data:`` line, no CR — else None (then
    ``piece_records``). Such a piece is exactly one record to the decoder, which resumes
    after it: its only LFs are the event line's end, the data line's and the blank line."""
    head, separator, data = piece.partition(b"\ndata: ")
    name = _EVENT_LINES.get(head)
    if (
        name is None
        or not separator
        or data.find(b"\n") != len(data) - 2
        or data[-1:] != b"\n"
        or data.find(b"\r") >= 0
    ):
        return None
    return name, data[:-2]


def parsed(records: list[bytes]) -> list[SSEEvent]:
    return [event for record in records if (event := parse_record(record)) is not None]


# Python 3.11's ``bytes.startswith`` parses its arguments through a format string and
# ``x in bytes`` raises and clears a TypeError inside: each costs several times a slice
# comparison, and this runs for every record of every stream, so slices and ``find`` it is.


def parse_record(record: bytes) -> SSEEvent | None:
    """One record (without its blank line) as ``(event name or None, data)``; None when it has
    no data (WHATWG: not dispatched)."""
    # The shapes both APIs send, one ``event:`` line with a name they use then one ``data:``
    # line (Anthropic) or a lone ``data:`` line (OpenAI), are cut directly (``partition`` and a
    # look-up of the whole event line: no ``find`` and no slice before the data); anything
    # else takes the general path.
    head, separator, data = record.partition(b"\ndata: ")
    name = _EVENT_LINES.get(head)
    if name is not None and separator and data.find(b"\n") < 0:
        return name, data
    if record[:6] == b"data: " and record.find(b"\n") < 0:
        return None, record[6:]
    return _parse_fields(record)


_EVENT_LINES = {
    b"event: " + name.encode(): name
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
