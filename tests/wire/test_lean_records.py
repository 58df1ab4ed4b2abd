"""The assemblers' reading of raw SSE records against parsing every record on its own.

``feed_records`` reads runs of delta records straight from their bytes (one ``orjson`` call
per run, ``_apply_run``) and, on Anthropic streams, records the API sends byte for byte the
same (pings, block stops) by a look-up. Each must leave the assembler exactly as parsing and
applying every record alone does — the same message, usage, stop reason, texts shown, and
the same error where the stream is broken — for every stream split anywhere into reads, cut
short, or corrupted inside or around a run.
"""

from __future__ import annotations

import itertools
import random
import uuid
from pathlib import Path
from typing import Any

import pytest

from subagents.models import _http, _sse
from subagents.models import openai as openai_module
from subagents.models.anthropic import StreamAssembler
from subagents.models.openai import ChunkAssembler

BENCH = Path(__file__).resolve().parents[2] / "bench"
RECORDED = BENCH / "recorded"


def _worker_reply(provider: str, turn: int) -> bytes:
    """The de-chunked body the bench's replay server sends a worker (bench/replay_server.py)."""
    import sys

    sys.path.insert(0, str(BENCH))
    from replay_server import AnthropicReplay, FanoutScenario, OpenAIReplay, encode

    calls = FanoutScenario(n=2, k=3).calls(["Note"], turn)
    replay = OpenAIReplay() if provider == "openai" else AnthropicReplay()
    piece, _ = _http._dechunk(bytearray(b"".join(encode(replay.reply(calls, None))) + b"0\r\n\r\n"))
    return piece


def _streams(provider: str) -> dict[str, bytes]:
    files = sorted(RECORDED.glob(f"{provider}_*.sse"))
    streams = {path.name: path.read_bytes() for path in files}
    streams["worker note"] = _worker_reply(provider, 0)
    streams["worker answer"] = _worker_reply(provider, 2)
    return streams


ANTHROPIC = _streams("anthropic")
OPENAI = _streams("openai")


@pytest.fixture(autouse=True)
def _fixed_call_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call that came without an id gets a random one: the same one on both readings."""
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=7))


def _assembler(provider: str) -> Any:
    return ChunkAssembler() if provider == "openai" else StreamAssembler()


def _outcome(provider: str, reads: list[bytes], *, general: bool) -> object:
    """Everything an assembler makes of ``reads``: the texts shown per read, then the message
    (or the error) — through ``feed_records``, or (``general``) every record parsed alone."""
    assembler = _assembler(provider)
    decoder = _sse.SSEDecoder()
    seen: list[object] = []
    try:
        for read in [*reads, None]:
            records = decoder.records(read) if read is not None else decoder.flush_records()
            if general:
                shown: list[str] = []
                for record in records:
                    event = _sse.parse_record(record)
                    if event is None:
                        continue
                    if provider == "openai":
                        assembler._feed_data(event[1], shown)
                    else:
                        assembler._feed_event(event[0], event[1], shown)
                seen.append(shown)
            else:
                seen.append(assembler.feed_records(records))
        seen.append(assembler.done("m", "label"))
    except Exception as exc:  # a broken stream's error must be the same on both readings
        seen.append((type(exc).__name__, str(exc)))
    return seen


def _same(provider: str, reads: list[bytes]) -> None:
    assert _outcome(provider, reads, general=False) == _outcome(provider, reads, general=True)


def _split(stream: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *cuts, len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(edges)]


CASES = [("anthropic", name) for name in ANTHROPIC] + [("openai", name) for name in OPENAI]


def _stream(provider: str, name: str) -> bytes:
    return (OPENAI if provider == "openai" else ANTHROPIC)[name]


@pytest.mark.parametrize(("provider", "name"), CASES)
def test_runs_are_read_as_every_record_parsed_alone_split_anywhere(
    provider: str, name: str
) -> None:
    stream = _stream(provider, name)
    _same(provider, [stream])
    for cut in range(0, len(stream) + 1, 3):
        _same(provider, _split(stream, [cut]))
        _same(provider, [stream[:cut]])  # the stream cut short there
    rng = random.Random(3)
    for _ in range(100):
        cuts = sorted(rng.sample(range(1, len(stream)), rng.randint(1, 8)))
        _same(provider, _split(stream, cuts))


class _CountingAnthropic(StreamAssembler):
    def __init__(self) -> None:
        super().__init__()
        self.runs: list[int] = []
        self.parsed: list[bytes] = []

    def _apply_run(self, run: list[bytes], shown: list[str], ended: bool) -> None:
        self.runs.append(len(run))
        super()._apply_run(run, shown, ended)

    def _feed_event(self, name: str | None, data: bytes, shown: list[str]) -> None:
        self.parsed.append(data)
        super()._feed_event(name, data, shown)


class _CountingOpenAI(ChunkAssembler):
    def __init__(self) -> None:
        super().__init__()
        self.runs: list[int] = []
        self.parsed = 0

    def _apply_run(self, run: list[bytes], shown: list[str], ended: bool) -> None:
        self.runs.append(len(run))
        super()._apply_run(run, shown, ended)

    def _feed_data(self, data: bytes, shown: list[str]) -> None:
        self.parsed += 1
        super()._feed_data(data, shown)


def test_the_fast_readings_are_taken() -> None:
    """Runs and look-ups are what the bench's streams are read by (else the comparisons
    above would compare the general path with itself)."""
    anthropic = _CountingAnthropic()
    anthropic.feed_records(_sse.SSEDecoder().records(ANTHROPIC["worker note"]))
    assert anthropic.runs == [8, 5]
    assert len(anthropic.parsed) == 2  # the message's start, the tool's start
    # (the message's delta is read by its usage alone: ``_read_delta``)
    openai_module._RECENT.clear()
    openai_module._FINISHES.clear()
    openai_module._IDLE.clear()
    openai = _CountingOpenAI()
    openai.feed_records(_sse.SSEDecoder().records(OPENAI["worker note"]))
    assert openai.runs == [7, 3]  # each run's first chunk parsed, and learnt from
    assert openai.parsed == 7  # those two, the role, the tool's start, finish, usage, [DONE]
    openai = _CountingOpenAI()
    openai.feed_records(_sse.SSEDecoder().records(OPENAI["worker note"]))
    assert openai.runs == [8, 4]  # the next stream reads them by what was learnt
    assert openai.parsed == 4  # and its finish chunk by a look-up


# What a corruption puts in place of a delta's string, or around it.
PIECES = [
    b'"',
    b"\\",
    b'\\"',
    b"\n",
    b"\t",
    b" ",
    b"\xff",
    b"\xc3",
    b'","x":"',
    b'"},"x":{"a":"',
    b'"}}',
    b"}}",
    b'"a',
    b"1",
    b"null",
    b'["a"]',
    b",",
    b"\\u00",
    b"\\ud800",
    b"\x00",
    b"\r",
    b"\n\n",
    b'\\n"',
]


def _mutations(stream: bytes, rng: random.Random) -> list[bytes]:
    """``stream`` with its delta strings corrupted: at each string's quotes and inside it."""
    out: list[bytes] = []
    starts = [
        i
        for i in range(len(stream))
        if stream.startswith(
            (b'"text":"', b'"partial_json":"', b'"content":"', b'"arguments":"'), i
        )
    ]
    for start in starts:
        quote = stream.index(b'":"', start) + 2
        end = quote + 1
        while stream[end : end + 1] != b'"':
            end += 2 if stream[end : end + 1] == b"\\" else 1
        for at in (quote, quote + 1, end, end + 1, (quote + end) // 2):
            piece = rng.choice(PIECES)
            out.append(stream[:at] + piece + stream[at:])
            out.append(stream[:at] + piece + stream[at + 1 :])
    for _ in range(150):
        at = rng.randrange(len(stream))
        out.append(stream[:at] + rng.choice(PIECES) + stream[at + rng.randint(0, 3) :])
    return out


@pytest.mark.parametrize(("provider", "name"), CASES)
def test_corrupted_runs_fail_or_read_as_every_record_parsed_alone(provider: str, name: str) -> None:
    stream = _stream(provider, name)
    rng = random.Random(name)
    for variant in _mutations(stream, rng):
        _same(provider, [variant])
        cut = rng.randrange(len(variant))
        _same(provider, _split(variant, [cut]))


NOT_ONE_STRING = [
    [b'"a', b'b","c"'],  # a string closed early, and one the next piece closes
    [b'"a",\t"b"', b'"c"'],  # two strings in one piece
    [b'"a"', b"1"],  # not a string
    [b'"a"', b'"b"\n'],  # a LF: the record is two lines
    [b'"a"', b'"b" '],
    [b'"a"', b' "b"'],
    [b'"\xff"', b'"b"'],
]


@pytest.mark.parametrize("pieces", NOT_ONE_STRING)
def test_anthropic_pieces_that_are_not_each_one_string_are_read_record_by_record(
    pieces: list[bytes],
) -> None:
    """The cases the one-parse proof rules out are what parsing each record gives (mostly
    an error; whitespace around a string is valid JSON and reads the same)."""
    start = (
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
    )
    prefix = (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":'
    )
    stream = start + b"".join(prefix + piece + b"}}\n\n" for piece in pieces)
    _same("anthropic", [stream + b'event: message_stop\ndata: {"type":"message_stop"}\n\n'])


def _openai_content(pieces: list[bytes], *, first: bool = True) -> bytes:
    """The recorded text stream's first chunk (the role), its second (``first``: some text),
    then one chunk per piece in the second's shape, and the stream's end."""
    records = OPENAI["openai_text.sse"].split(b"\n\n")
    head, template = records[: 2 if first else 1], records[1]
    at = template.index(b'"content":') + len(b'"content":')
    end = template.index(b'"},', at) + 1
    before, after = template[:at], template[end:]
    body = [*head, *(before + piece + after for piece in pieces), *records[-3:]]
    return b"\n\n".join(body)


@pytest.mark.parametrize("pieces", NOT_ONE_STRING)
def test_openai_pieces_that_are_not_each_one_string_are_read_record_by_record(
    pieces: list[bytes],
) -> None:
    _same("openai", [_openai_content([b'"x"', *pieces])])


def test_an_openai_template_whose_string_is_not_what_the_chunk_reads_is_not_used() -> None:
    """A chunk whose ``content`` is given twice reads the second: a template cut at the first
    would read each later chunk's first ``content`` instead (the probe rules it out)."""
    pieces = [b'"a","content":"a"', b'"b","content":"a"', b'"c","content":"a"']
    stream = _openai_content(pieces, first=False)
    _same("openai", [stream])
    assembler = ChunkAssembler()
    assembler.feed_records(_sse.SSEDecoder().records(stream))
    assert "".join(assembler.text) == "aaa"


def test_an_openai_opening_over_two_lines_is_not_read_from_one() -> None:
    """A first chunk whose data spans two ``data:`` lines has an opening holding an LF: a
    later record written as ``data: `` + those bytes is two lines, the second no data, so
    it is not the chunk the opening and a learnt template (or a finish chunk's look-up)
    would read it as — here not JSON at all, an error on both readings."""
    records = OPENAI["openai_text.sse"].split(b"\n\n")
    cut = records[0].index(b'"object"')

    def spread(record: bytes) -> bytes:  # the same data, over two data lines
        return record[:cut] + b"\ndata: " + record[cut:]

    def raw(record: bytes) -> bytes:  # the same bytes, the second line no data line
        return record[:cut] + b"\n" + record[cut:]

    finish = next(i for i, r in enumerate(records) if b'"finish_reason":"stop"' in r)
    for bad in (2, finish):
        body = [spread(records[0]), *map(spread, records[1:bad]), raw(records[bad])]
        stream = b"\n\n".join([*body, *records[bad + 1 :]])
        _same("openai", [stream])
        assert _outcome("openai", [stream], general=False)[-1][0] == "HTTPTransportError"


def test_an_openai_template_learnt_from_two_lines_is_not_read_from_one() -> None:
    """A content chunk whose data spans two ``data:`` lines (cut after its string: the LF in
    what follows it) is valid, and teaches nothing: a later record of the same bytes with
    the second line no data line reads as ``data: `` + the first line alone, not JSON, an
    error on both readings. A template learnt from the two lines read that record as the
    chunk it would be on one line (a misreading, present since session 9), in the same
    stream and, through ``_RECENT``, in the next one."""
    records = OPENAI["openai_text.sse"].split(b"\n\n")
    content = next(i for i, r in enumerate(records) if b'"content":"' in r and b"role" not in r)

    def spread(record: bytes) -> bytes:  # the same data, over two data lines
        cut = record.index(b'"usage"')
        return record[:cut] + b"\ndata: " + record[cut:]

    def raw(record: bytes) -> bytes:  # the same bytes, the second line no data line
        cut = record.index(b'"usage"')
        return record[:cut] + b"\n" + record[cut:]

    assert raw(records[content + 1]).count(b"\n") == 1
    taught, read = spread(records[content]), raw(records[content + 1])
    stream = b"\n\n".join([*records[:content], taught, read, *records[content + 2 :]])
    for _ in range(2):  # the second time, with whatever the first stream left in ``_RECENT``
        _same("openai", [stream])
        assert _outcome("openai", [stream], general=False)[-1][0] == "HTTPTransportError"
    openai_module._RECENT.clear()
    learnt = b"\n\n".join([*records[:content], spread(records[content]), *records[-3:]])
    _outcome("openai", [learnt], general=False)  # a stream that teaches, then one that reads
    later = b"\n\n".join([*records[:content], raw(records[content + 1]), *records[-3:]])
    _same("openai", [later])


# --- Chunks as they came (``feed_pieces``) against the records split from them and parsed


def _chunks_of(stream: bytes) -> list[bytes]:
    """One chunk per record and its blank line, as the APIs send them (the last chunk is
    what follows the last blank line, if anything)."""
    parts = stream.split(b"\n\n")
    return [part + b"\n\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _outcome_pieces(provider: str, reads: list[list[bytes]]) -> object:
    """What ``feed_pieces`` makes of network reads of chunks, as ``_outcome`` reports it."""
    assembler = _assembler(provider)
    decoder = _sse.SSEDecoder()
    seen: list[object] = []
    try:
        for read in reads:
            seen.append(assembler.feed_pieces([piece for piece in read if piece], decoder))
        seen.append(assembler.feed_records(decoder.flush_records()))
        seen.append(assembler.done("m", "label"))
    except Exception as exc:
        seen.append((type(exc).__name__, str(exc)))
    return seen


def _same_pieces(provider: str, reads: list[list[bytes]]) -> None:
    joined = [b"".join(read) for read in reads]
    assert _outcome_pieces(provider, reads) == _outcome(provider, joined, general=True), reads


def _grouped(chunks: list[bytes], rng: random.Random) -> list[list[bytes]]:
    """``chunks`` in network reads of a random number of chunks each."""
    reads: list[list[bytes]] = []
    at = 0
    while at < len(chunks):
        size = rng.choice([1, 2, 3, len(chunks)])
        reads.append(chunks[at : at + size])
        at += size
    return reads


@pytest.mark.parametrize(("provider", "name"), CASES)
def test_chunks_are_read_as_every_record_split_from_them_and_parsed_alone(
    provider: str, name: str
) -> None:
    """A chunk per record (the usual case, read without a split), records cut across chunks,
    several records in a chunk, in reads of one or more chunks."""
    stream = _stream(provider, name)
    chunks = _chunks_of(stream)
    _same_pieces(provider, [chunks])
    _same_pieces(provider, [[chunk] for chunk in chunks])
    rng = random.Random(name)
    for _ in range(60):
        cuts = sorted(rng.sample(range(1, len(stream)), rng.randint(1, 12)))
        _same_pieces(provider, _grouped(_split(stream, cuts), rng))
        _same_pieces(provider, _grouped(chunks, rng))


# What a hostile chunk holds besides its record: blank lines, other line ends, records.
CHUNK_PIECES = [
    *PIECES,
    b"\n\n\n",
    b"\r\n",
    b"\r\r",
    b"\n\r",
    b"\r\n\r\n",
    b"\n\ndata: ",
    b"data: x\n\n",
    b'data: {"choices":[]}\n\n',
    b"event: ping\n\n",
    b"\n\nevent: message_stop\n",
    b": comment\n\n",
]


@pytest.mark.parametrize(("provider", "name"), CASES)
def test_hostile_chunks_fail_or_read_as_every_record_split_from_them(
    provider: str, name: str
) -> None:
    """Each chunk corrupted in turn: a blank line or a record inside its data, CR or CRLF
    line ends, an LF or a CR after its blank line, a record cut short; in one read and in
    reads of a chunk each, then the stream's corrupted strings chunked as the APIs would."""
    chunks = _chunks_of(_stream(provider, name))
    rng = random.Random(name + "chunks")
    for index, chunk in enumerate(chunks):
        for _ in range(6):
            piece = rng.choice(CHUNK_PIECES)
            at = rng.choice([0, len(chunk) // 2, len(chunk) - 2, len(chunk) - 1, len(chunk)])
            bad = [*chunks[:index], chunk[:at] + piece + chunk[at:], *chunks[index + 1 :]]
            _same_pieces(provider, [bad])
            _same_pieces(provider, _grouped(bad, rng))
        _same_pieces(provider, [[*chunks[:index], chunk[:-1], *chunks[index + 1 :]]])
    for variant in _mutations(_stream(provider, name), rng)[::3]:
        _same_pieces(provider, [_chunks_of(variant)])
    for index in range(len(chunks) + 1):  # a stray chunk between two, of no record at all
        for stray in STRAY_CHUNKS:
            _same_pieces(provider, [[*chunks[:index], stray, *chunks[index:]]])


# Chunks that are no record but begin or end as the assemblers' comparisons do: blank lines
# and LFs before a JSON string and a run's end (the "no run" and "no opening" constants start
# no record, but they can start a chunk), a known record after a blank line.
STRAY_CHUNKS = [
    b"\n\n",
    b"\n",
    b'\n"s"\n\n',
    b'\n\n"s"}}\n\n',
    b'\n\n\n"s"}}\n\n',
    b'\n\nevent: ping\ndata: {"type":"ping"}\n\n',
    b'\n\n"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}\n\n',
    b" \n\n",
]


def test_the_pieces_are_read_without_the_decoder_when_each_ends_its_record() -> None:
    """The bench's replies, a chunk per record: no piece goes through the decoder, and the
    runs are the records' runs."""

    class Decoder(_sse.SSEDecoder):
        def records(self, data: bytes) -> list[bytes]:
            raise AssertionError("read through the decoder")

    anthropic = _CountingAnthropic()
    anthropic.feed_pieces(_chunks_of(ANTHROPIC["worker note"]), Decoder())
    assert anthropic.runs == [8, 5]
    openai_module._RECENT.clear()
    openai = _CountingOpenAI()
    openai.feed_pieces(_chunks_of(OPENAI["worker note"]), Decoder())
    assert openai.runs == [7, 3]
    # A body not chunked comes as one piece per read, of many records: read by runs too.
    anthropic = _CountingAnthropic()
    anthropic.feed_pieces([ANTHROPIC["worker note"]], Decoder())
    assert anthropic.runs == [8, 5]
    openai = _CountingOpenAI()
    openai.feed_pieces([OPENAI["worker note"]], Decoder())
    assert openai.runs == [8, 4]


def test_a_piece_that_ends_its_records_is_read_as_the_decoder_reads_it() -> None:
    """``_sse.piece_records`` gives the decoder's records exactly, and only for a piece after
    which the decoder resumes with nothing pending (else None), and ``piece_event`` the one
    event of a piece that is one record: pieces made of records, line ends of every kind,
    blank lines and stray CRs and LFs, at the end above all."""
    rng = random.Random(11)
    bits = [b"data: a", b"event: ping", b"x", b"\n", b"\r", b"\r\n", b"\n\n", b"\n\n\n", b":c"]
    bits += [b"\ndata: ", b"data: ", b"event: message_stop"]
    read = events = 0
    for _ in range(20000):
        piece = b"".join(rng.choice(bits) for _ in range(rng.randint(1, 7)))
        decoder = _sse.SSEDecoder()
        records = decoder.records(piece)
        found = _sse.piece_records(piece)
        if found is not None:  # (None: the decoder reads on from the piece's start)
            read += 1
            assert found == records and decoder.resumes(), piece
        event = _sse.piece_event(piece)  # one record of the usual shape, read inline
        if event is not None:
            events += 1
            assert [event] == _sse.parsed(records) and len(records) == 1, piece
            assert decoder.resumes(), piece
    for _ in range(5000):  # pieces shaped like one Messages API record, or nearly
        piece = b"".join(
            [
                rng.choice([b"event: ping", b"event: message_stop", b"event: ping", b"event: x"]),
                rng.choice([b"\ndata: ", b"\ndata: ", b"\ndata:", b"\n", b"\r\ndata: "]),
                *(rng.choice([b"a", b"{}", b" ", b"\r", b"\n", b"\r\n", b"data: b"]) for _ in "ab"),
                rng.choice(
                    [b"\n\n", b"\n\n", b"\n\n", b"\n", b"\n\n\n", b"\r\n\r\n", b"\n\r", b""]
                ),
            ]
        )
        event = _sse.piece_event(piece)
        if event is not None:
            events += 1
            decoder = _sse.SSEDecoder()
            records = decoder.records(piece)
            assert [event] == _sse.parsed(records) and len(records) == 1, piece
            assert decoder.resumes(), piece
    assert read > 1000 and events > 200


def test_a_run_read_record_by_record_that_changes_the_run_is_matched_as_it_is_now() -> None:
    """A record of a run's shape that is not one string — here one that, parsed, starts a
    tool block (Anthropic, a repeated ``type``) or adds tool arguments (OpenAI) — is read
    record by record and changes what a run is; a later record is read by the run as it is
    then. Before, a record without data (a comment) skipped the refresh, and the next text
    delta was read as the old run's text but applied to the new one (as tool input)."""
    records = ANTHROPIC["anthropic_text.sse"].split(b"\n\n")
    first = next(i for i, r in enumerate(records) if b"text_delta" in r)
    delta = records[first]
    at = delta.index(b'"text":') + len(b'"text":')
    start = b',"type":"content_block_start","content_block":{"type":"tool_use","id":"t","name":"N"'
    bad = delta[:at] + b'"a"}' + start + b',"input":{}' + delta[delta.rindex(b"}}") :]
    assert bad.endswith(b"}}") and bad.startswith(delta[:at])
    stream = [*records[: first + 1], bad, b": comment", *records[first + 1 :]]
    _same("anthropic", [b"\n\n".join(stream)])

    records = OPENAI["openai_text.sse"].split(b"\n\n")
    content = next(i for i, r in enumerate(records) if b'"content":"' in r and b"role" not in r)
    text = records[content]
    at = text.index(b'"content":') + len(b'"content":')
    end = text.index(b"}", at)
    calls = b'"","tool_calls":[{"index":0,"function":{"arguments":"x"}}]'
    bad = text[:at] + calls + text[end:]
    for _ in range(2):  # with no template yet, then with the one ``_RECENT`` keeps
        stream = [*records[: content + 1], bad, b": comment", *records[content + 1 :]]
        _same("openai", [b"\n\n".join(stream)])
