"""A stream's usage as the assemblers read it, against the plain reading they replaced
(session 15: Anthropic's four counters written out instead of looped over, OpenAI's counters
read inline, and an OpenAI chunk carrying usage not tried as a finish or a template).

Each random usage goes through the lean transport's path — SSE records fed to the
assembler, ``done`` — and must give what the plain reading gives: the same ``Usage``, or the
same error for a counter that is no number."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from subagents.messages import Usage
from subagents.models import _sse
from subagents.models import openai as openai_module
from subagents.models.anthropic import USAGE_KEYS, StreamAssembler
from subagents.models.openai import ChunkAssembler

# What a counter may be on the wire: a plain int, absent, null, or something ``int()`` reads
# (a float, a bool, a numeric string) or refuses (another string).
VALUES: list[object] = [0, 1, 7, 1532, 10**12, None, True, False, 2.5, "12", "", -3]
MISSING, BAD = object(), object()


def _counters(rng: random.Random, keys: tuple[str, ...]) -> dict[str, object]:
    usage: dict[str, object] = {}
    for key in keys:
        value = rng.choice([*VALUES, MISSING, BAD])
        if value is not MISSING:
            # a string ``int()`` refuses, naming its counter: which one fails first shows
            usage[key] = f"bad {key}" if value is BAD else value
    if rng.random() < 0.3:  # what the API adds beside the counters
        usage["service_tier"] = "standard"
        usage["cache_creation"] = {"ephemeral_5m_input_tokens": 3}
    return usage


def _plain_anthropic(usages: list[dict[str, object]]) -> Usage:
    """The loop ``_merge_usage`` was (before session 15), over each usage in turn."""
    counters: dict[str, int] = {}
    for usage in usages:
        if not usage:
            continue
        for key in USAGE_KEYS:
            value = usage.get(key)
            if value is not None:
                counters[key] = value if type(value) is int else int(value)  # type: ignore[call-overload]
    return Usage(**counters)


def _outcome(assembler: Any, stream: bytes) -> object:
    decoder = _sse.SSEDecoder()
    try:
        assembler.feed_records(decoder.records(stream) + decoder.flush_records())
        return assembler.done("m", "label").usage
    except Exception as exc:
        return (type(exc).__name__, str(exc))


def _plain_outcome(plain: Any, *args: object) -> object:
    try:
        return plain(*args)
    except Exception as exc:
        return (type(exc).__name__, str(exc))


def _anthropic_stream(start: dict[str, object], delta: dict[str, object]) -> bytes:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    records = [
        ("message_start", {"type": "message_start", "message": {**message, "usage": start}}),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": delta},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(
        b"event: %s\ndata: %s\n\n" % (name.encode(), orjson.dumps(data)) for name, data in records
    )


def test_anthropic_usage_is_what_the_plain_loop_reads() -> None:
    rng = random.Random(15)
    for _ in range(2000):
        start = _counters(rng, USAGE_KEYS)
        delta = _counters(rng, USAGE_KEYS) if rng.random() < 0.8 else {}
        expected = _plain_outcome(_plain_anthropic, [start, delta])
        assert _outcome(StreamAssembler(), _anthropic_stream(start, delta)) == expected


def test_anthropic_usage_of_the_bench_stream_is_its_last_counters() -> None:
    start = {
        "input_tokens": 4,
        "cache_creation_input_tokens": 1532,
        "cache_read_input_tokens": 10210,
        "output_tokens": 1,
    }
    delta = {"output_tokens": 61}
    usage = _outcome(StreamAssembler(), _anthropic_stream(start, delta))
    assert usage == Usage(
        input_tokens=4,
        output_tokens=61,
        cache_creation_input_tokens=1532,
        cache_read_input_tokens=10210,
    )


def _plain_openai(usage: dict[str, Any]) -> Usage:
    """``map_usage`` as it was before session 15 (a helper call per counter)."""

    def count(value: Any) -> int:
        return value if type(value) is int else int(value or 0)

    prompt = count(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details") or {}
    cached = count(details.get("cached_tokens"))
    written = count(details.get("cache_write_tokens"))
    uncached = prompt - cached - written
    return Usage(
        input_tokens=uncached if uncached > 0 else 0,
        output_tokens=count(usage.get("completion_tokens")),
        cache_creation_input_tokens=written,
        cache_read_input_tokens=cached,
    )


OPENING = b'{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m",'


def _openai_stream(usage: dict[str, object], *, tool_start: bool) -> bytes:
    """A text delta, a tool call's start (carrying ``usage`` when ``tool_start``), two
    argument deltas, the finish, and a usage chunk; every chunk after one opening."""

    def chunk(rest: dict[str, object]) -> bytes:
        return b"data: " + OPENING + orjson.dumps(rest)[1:] + b"\n\n"

    def choice(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    def arguments(text: str) -> dict[str, object]:
        return {"tool_calls": [{"index": 0, "function": {"arguments": text}}]}

    start = {
        "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "N"}}]
    }
    chunks = [
        chunk({"choices": [choice({"role": "assistant", "content": ""})], "usage": None}),
        chunk({"choices": [choice({"content": "hi"})], "usage": None}),
        chunk({"choices": [choice(start)], "usage": usage if tool_start else None}),
        chunk({"choices": [choice(arguments('{"a":'))], "usage": None}),
        chunk({"choices": [choice(arguments("1}"))], "usage": None}),
        chunk({"choices": [choice({}, "tool_calls")], "usage": None}),
        chunk({"choices": [], "usage": None if tool_start else usage}),
        b"data: [DONE]\n\n",
    ]
    return b"".join(chunks)


def test_openai_usage_is_what_the_plain_reading_reads() -> None:
    rng = random.Random(16)
    for _ in range(2000):
        usage = _counters(rng, ("prompt_tokens", "completion_tokens", "total_tokens"))
        if rng.random() < 0.7:
            details = _counters(rng, ("cached_tokens", "cache_write_tokens", "audio_tokens"))
            usage["prompt_tokens_details"] = details if rng.random() < 0.9 else None
        tool_start = rng.random() < 0.3
        # the stream's own usage unless it is all zeros or refused (then no usage counted:
        # ``feed`` takes a chunk's usage only when it is not empty)
        expected = _plain_outcome(_plain_openai, usage) if usage else Usage()
        stream = _openai_stream(usage, tool_start=tool_start)
        assert _outcome(ChunkAssembler(), stream) == expected


class _Runs(ChunkAssembler):
    def __init__(self) -> None:
        super().__init__()
        self.runs: list[int] = []

    def _apply_run(self, run: list[bytes], shown: list[str], ended: bool) -> None:
        self.runs.append(len(run))
        super()._apply_run(run, shown, ended)


@pytest.mark.parametrize("tool_start", [False, True])
def test_a_chunk_with_usage_that_starts_a_call_still_brings_its_arguments_template(
    tool_start: bool,
) -> None:
    """A chunk carrying usage is not tried as a finish or a template, but the call it starts
    still takes the template the last stream learnt for that call: the next stream reads the
    call's arguments as a run, and both streams give the message a plain reading gives."""
    openai_module._RECENT.clear()
    usage = {"prompt_tokens": 9, "completion_tokens": 2}
    stream = _openai_stream(usage, tool_start=tool_start)
    first, second = _Runs(), _Runs()
    dones = []
    for assembler in (first, second):
        decoder = _sse.SSEDecoder()
        assembler.feed_records(decoder.records(stream) + decoder.flush_records())
        dones.append(assembler.done("m", "label"))
    general = ChunkAssembler()
    for record in _sse.SSEDecoder().records(stream):
        event = _sse.parse_record(record)
        assert event is not None
        general.feed_events([event])
    assert dones[0] == dones[1] == general.done("m", "label")
    assert dones[0].usage == Usage(input_tokens=9, output_tokens=2)
    assert first.runs == [1]  # the second argument delta, by the template its first taught
    assert second.runs == [1, 2]  # the text, and both argument deltas: learnt at the start


# How a message_delta's usage bytes may be broken or odd: what follows the usage, what is
# inside it, what stands for it.
DELTA_CORRUPTIONS: list[tuple[str, bytes]] = [
    ("after", b',"x":1'),
    ("after", b"  "),
    ("after", b"\t"),
    ("after", b"}"),
    ("after", b"\n"),
    ("after", b"\r"),
    ("before", b" "),
    ("before", b"\n"),
    ("before", b"\r\n"),
    ("inside", b"\n"),
    ("inside", b"\r"),
    ("inside", b'"'),
    ("inside", b"\xff"),
    ("whole", b"null"),
    ("whole", b"[1]"),
    ("whole", b"7"),
    ("whole", b""),
    ("whole", b"{}"),
    ("cut", b""),
]
STOP_REASONS = ["end_turn", "tool_use", "max_tokens", "pause_turn", "refusal", "stop_sequence", "x"]


def _delta_record(rng: random.Random) -> bytes:
    delta: dict[str, object] = {"stop_reason": rng.choice(STOP_REASONS)}
    if rng.random() < 0.9:
        delta["stop_sequence"] = None if rng.random() < 0.8 else "END"
    if rng.random() < 0.05:
        delta = {"stop_sequence": None, "stop_reason": "tool_use"}  # another order
    counters = {key: rng.choice([0, 3, 61, 10210]) for key in USAGE_KEYS if rng.random() < 0.8}
    usage = orjson.dumps(counters)
    if rng.random() < 0.5:
        where, piece = rng.choice(DELTA_CORRUPTIONS)
        at = rng.randrange(1, len(usage)) if len(usage) > 1 else 0
        usage = {
            "after": usage + piece,
            "before": piece + usage,
            "inside": usage[:at] + piece + usage[at:],
            "whole": piece,
            "cut": usage[:at],
        }[where]
    head = orjson.dumps({"type": "message_delta", "delta": delta})[:-1]
    closing = b"}" if rng.random() < 0.8 else rng.choice(CLOSINGS)
    return b"event: message_delta\ndata: " + head + b',"usage":' + usage + closing


# What may stand for the record's closing brace.
CLOSINGS = [b"]", b"", b"}}", b" }", b"},", b'},"x":1}', b"}\n", b"}\r", b"}\r\n", b"1"]


def _delta_stream(rng: random.Random) -> list[bytes]:
    """A text answer ending with a random message_delta: its records, each with its blank
    line (the API sends one per HTTP chunk)."""
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 5}}}
    records = [
        b"event: message_start\ndata: " + orjson.dumps(start),
        b"event: content_block_start\ndata: "
        b'{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
        b"event: content_block_delta\ndata: "
        b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}',
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}',
        _delta_record(rng),
        b'event: message_stop\ndata: {"type":"message_stop"}',
    ]
    return [record + b"\n\n" for record in records]


def _delta_outcome(pieces: list[bytes], how: str) -> object:
    assembler = StreamAssembler()
    decoder = _sse.SSEDecoder()
    try:
        if how == "pieces":  # as ``LeanCall.respond`` reads a chunked body
            assembler.feed_pieces(pieces, decoder)
            assembler.feed_records(decoder.flush_records())
        elif how == "records":
            assembler.feed_records(decoder.records(b"".join(pieces)) + decoder.flush_records())
        else:  # every record parsed alone, as the SDK reads it
            shown: list[str] = []
            for record in decoder.records(b"".join(pieces)) + decoder.flush_records():
                event = _sse.parse_record(record)
                if event is not None:
                    assembler._feed_event(event[0], event[1], shown)
        done = assembler.done("m", "label")
        return done.message, done.usage, done.stop_reason
    except Exception as exc:
        return (type(exc).__name__, str(exc))


def test_a_message_delta_read_by_its_usage_reads_as_parsed_whole() -> None:
    rng = random.Random(17)
    fast = 0
    for _ in range(3000):
        pieces = _delta_stream(rng)
        expected = _delta_outcome(pieces, "general")
        assert _delta_outcome(pieces, "pieces") == expected, pieces[4]
        assert _delta_outcome(pieces, "records") == expected, pieces[4]
        try:
            fast += StreamAssembler()._read_delta(pieces[4], True)
        except AttributeError:  # a usage that is no object: it fails on both readings
            pass
    assert fast > 600  # the usual deltas were read by their usage (else this compares nothing)


def test_the_bench_message_delta_is_read_by_its_usage() -> None:
    record = (
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use",'
        b'"stop_sequence":null},"usage":{"input_tokens":4,"cache_creation_input_tokens":1532,'
        b'"cache_read_input_tokens":10210,"output_tokens":61}}'
    )
    assembler = StreamAssembler()
    assert assembler._read_delta(record + b"\n\n", True)
    assert assembler._read_delta(record, False)
    assert not assembler._read_delta(record + b"\n\n", False)  # a record has no blank line
    assert assembler.stop_reason == "tool_use"
    assert assembler.usage == {
        "input_tokens": 4,
        "cache_creation_input_tokens": 1532,
        "cache_read_input_tokens": 10210,
        "output_tokens": 61,
    }
