"""The lean transport against the official SDKs: same recorded streams, same error responses,
one local server; every observable result must be identical.

The SDK path is the reference for auth, error wording and mapping; the lean path is what runs
by default (``models/_lean.py``). For each case both transports make the same call and we compare
what a caller sees — every streamed text delta, the final message, usage (cache counters
included) and stop reason, or the ``ModelError``'s kind, status, retry-after and message — and
what the server received: the request body byte for byte, the path, and the credential header.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from wire_server import AnthropicWire, OpenAIWire, Reply, WireServer

from subagents.messages import Message, user_message
from subagents.models._lean import Transport
from subagents.models.anthropic import ANTHROPIC_API_VERSION, AnthropicModel
from subagents.models.base import (
    MessageDone,
    ModelError,
    ModelRequest,
    RequestMetadata,
    TextDelta,
    ToolSchema,
)
from subagents.models.openai import OpenAIModel

RECORDED = Path(__file__).resolve().parents[2] / "bench" / "recorded"
TOOLS = [
    ToolSchema(name="Read", description="Read a file ✓", input_schema={"type": "object"}),
    ToolSchema(name="Grep", description="Search", input_schema={"type": "object"}),
]
HISTORY: list[Message] = [
    user_message("read setup.cfg — ünïcode"),
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a"}},
        ],
    },
    user_message([{"type": "tool_result", "tool_use_id": "t1", "content": "x = 1"}]),
]


def request(**kwargs: Any) -> ModelRequest:
    return ModelRequest(
        model="",
        system="You are a test agent.",
        messages=HISTORY,
        tools=TOOLS,
        metadata=RequestMetadata(agent_id="a1", agent_type="test", prompt="p"),
        **kwargs,
    )


def recorded(name: str) -> Reply:
    return Reply(sse=(RECORDED / name).read_bytes())


async def observe(model: AnthropicModel | OpenAIModel, call: ModelRequest) -> tuple[Any, ...]:
    """What a caller sees of one call: the deltas and the final event, or the error."""
    deltas: list[str] = []
    try:
        async for event in model.stream(call):
            if isinstance(event, TextDelta):
                deltas.append(event.text)
            elif isinstance(event, MessageDone):
                done = event
    except ModelError as error:
        return ("error", error.kind, error.status, error.retry_after, str(error), deltas)
    finally:
        await model.aclose()
    return ("done", deltas, done.message, done.usage, done.stop_reason, done.model)


async def both(server: WireServer, reply: Reply, build: Any, call: ModelRequest) -> list[Any]:
    """Serve ``reply`` to each transport in turn; the two observations and requests."""
    seen: list[Any] = []
    for transport in ("sdk", "lean"):
        server.queue(reply)
        seen.append(await observe(build(transport), call))
    return seen


ANTHROPIC_ERRORS = [
    Reply(
        status=529,
        body={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ),
    Reply(
        status=429,
        headers={"retry-after": "7"},
        body={"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
    ),
    Reply(status=500, text=b"upstream connect error"),
    Reply(
        status=401, body={"type": "error", "error": {"type": "authentication_error", "message": ""}}
    ),
    Reply(status=404, body={"type": "error", "error": {"type": "not_found_error", "message": "m"}}),
    # The SDK's wording (anthropic >= 2.17) names what the error carries: an error code and
    # details, a request id from the header or the body, no message, no body, non-ASCII text.
    Reply(
        status=400,
        headers={"request-id": "req_h"},
        body={
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "bad «x»",
                "details": {"error_code": "too_long", "limit": 5},
            },
            "request_id": "req_b",
        },
    ),
    Reply(
        status=403,
        body={
            "type": "error",
            "error": {"type": "permission_error", "message": "no", "details": {"error_code": "c"}},
            "request_id": "req_b",
        },
    ),
    Reply(status=409, body={"type": "error", "error": {"type": "conflict_error"}}),
    Reply(status=400, body=["not", "a", "mapping"]),
    Reply(status=503, text=b""),
]


@pytest.mark.parametrize(
    "reply",
    [
        *(recorded(n) for n in ("anthropic_text.sse", "anthropic_tool_use.sse")),
        recorded("anthropic_thinking_tools.sse"),
        *ANTHROPIC_ERRORS,
    ],
    ids=[
        "text",
        "tool_use",
        "thinking_tools",
        "529",
        "429",
        "500-text",
        "401",
        "404",
        "400-details",
        "403-code",
        "409-no-message",
        "400-list",
        "503-empty",
    ],
)
async def test_anthropic_transports_agree(wire_server: WireServer, reply: Reply) -> None:
    def build(transport: Transport) -> AnthropicModel:
        return AnthropicModel(
            "claude-x", api_key="k-1", base_url=wire_server.url, transport=transport
        )

    thinking = {"type": "enabled", "budget_tokens": 1024}
    sdk, lean = await both(wire_server, reply, build, request(thinking=thinking))

    assert lean == sdk
    sent_sdk, sent_lean = wire_server.requests
    assert sent_lean.raw == sent_sdk.raw  # the same body, byte for byte
    assert sent_lean.path == sent_sdk.path == "/v1/messages"
    for header in ("authorization", "anthropic-version", "content-type", "accept"):
        assert sent_lean.headers[header] == sent_sdk.headers[header], header


async def test_anthropic_stream_error_events_agree(wire_server: WireServer) -> None:
    def build(transport: Transport) -> AnthropicModel:
        return AnthropicModel(
            "claude-x", api_key="k", base_url=wire_server.url, transport=transport
        )

    reply = AnthropicWire(wire_server).stream_error("overloaded_error")
    reply.headers = {"retry-after": "3"}
    sdk, lean = await both(wire_server, reply, build, request())

    assert lean == sdk
    assert lean[1:4] == ("overloaded", None, 3.0)


def test_the_pinned_api_version_is_the_sdks() -> None:
    from anthropic._constants import ANTHROPIC_API_VERSION as SDK_VERSION

    assert SDK_VERSION == ANTHROPIC_API_VERSION


async def test_custom_headers_and_auth_token_are_sent_like_the_sdk(
    wire_server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "token-9")
    monkeypatch.setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Team: blue\nX-Trace:  abc ")

    def build(transport: Transport) -> AnthropicModel:
        return AnthropicModel("claude-x", base_url=wire_server.url, transport=transport)

    sdk, lean = await both(wire_server, recorded("anthropic_text.sse"), build, request())

    assert lean == sdk
    sent_sdk, sent_lean = wire_server.requests
    for header in ("authorization", "x-team", "x-trace"):
        assert sent_lean.headers[header] == sent_sdk.headers[header], header
    assert sent_lean.headers["authorization"] == "Bearer token-9"


def _framings(body: bytes) -> dict[str, bytes]:
    """The same stream in the other framings SSE allows: CRLF or CR line ends, comments and
    unknown fields, a record's JSON split over two ``data:`` lines, no space
    after a colon, and the last record left without its blank line."""
    records = body.split(b"\n\n")[:-1]
    spread = []
    for record in records:
        head, _, data = record.rpartition(b"data: ")
        cut = data.find(b",")
        spread.append(
            head + b"data: " + data[:cut] + b"\ndata:" + data[cut:] if cut > 0 else record
        )
    noisy = b"".join(b": keep-alive\n\n" + r + b"\nx-unknown: 1\n\n" for r in spread)
    return {
        "crlf": body.replace(b"\n", b"\r\n"),
        "cr": body.replace(b"\n", b"\r"),
        "comments-multiline": noisy,
        # The last record without its blank line: both SDKs drop it (Anthropic's is
        # ``message_stop``, so the stream "ended before message_stop"; OpenAI's is ``[DONE]``).
        "unterminated": body.rstrip(b"\n"),
        "unterminated-one-newline": body.rstrip(b"\n") + b"\n",
        # ... but a CR that ends the stream still ends its line: the last record is complete.
        "ends-in-lf-cr": body.rstrip(b"\n") + b"\n\r",
        "ends-in-crlf-cr": body.rstrip(b"\n").replace(b"\n", b"\r\n") + b"\r\n\r",
    }


ENDINGS = ("unterminated", "unterminated-one-newline", "ends-in-lf-cr", "ends-in-crlf-cr")
FRAMED = [
    pytest.param(name, framing, piece, id=f"{name}-{framing}-{'whole' if piece > 7 else piece}")
    for name in ("anthropic_tool_use.sse", "openai_tool_call.sse", "openai_text.sse")
    for framing in ("crlf", "cr", "comments-multiline", *ENDINGS)
    for piece in (1 << 20, 7)
]


@pytest.mark.parametrize("framing", ["plain", "crlf", "cr", "comments-multiline", *ENDINGS])
@pytest.mark.parametrize("name", ["anthropic_thinking_tools.sse", "openai_tool_call.sse"])
def test_the_sse_decoder_reads_what_the_sdks_decoder_reads_split_anywhere(
    name: str, framing: str
) -> None:
    """Every record the SDK's decoder yields, and nothing else, whatever the network reads:
    the body split at every offset into two reads, and in reads of 1 to 9 bytes."""
    from anthropic._streaming import SSEDecoder as SDKDecoder

    from subagents.models._sse import SSEDecoder

    body = (RECORDED / name).read_bytes()
    body = body if framing == "plain" else _framings(body)[framing]
    expected = [(e.event, e.data.encode()) for e in SDKDecoder().iter_bytes(iter([body]))]
    assert len(expected) > 15

    def decode(pieces: list[bytes]) -> list[tuple[str | None, bytes]]:
        decoder = SSEDecoder()
        return [event for piece in pieces for event in decoder.feed(piece)] + decoder.flush()

    for cut in range(len(body) + 1):
        assert decode([body[:cut], body[cut:]]) == expected, cut
    for size in range(1, 10):
        assert decode([body[i : i + size] for i in range(0, len(body), size)]) == expected, size


@pytest.mark.parametrize(("name", "framing", "piece"), FRAMED)
async def test_streams_in_every_framing_and_split_anywhere_agree(
    wire_server: WireServer, name: str, framing: str, piece: int
) -> None:
    """The lean transport against the SDK on the same bytes, the body in one HTTP chunk or in
    7-byte chunks (chunk boundaries inside CRLFs, ``data:`` prefixes and UTF-8 characters),
    and both against the plain recording: the framing never changes what a caller sees."""
    url = wire_server.url
    plain = recorded(name)
    if name.startswith("anthropic"):

        def build(transport: Transport) -> AnthropicModel | OpenAIModel:
            return AnthropicModel("claude-x", api_key="k", base_url=url, transport=transport)
    else:

        def build(transport: Transport) -> AnthropicModel | OpenAIModel:
            return OpenAIModel("gpt-x", api_key="k", base_url=url + "/v1", transport=transport)

    assert plain.sse is not None
    framed = Reply(sse=_framings(plain.sse)[framing], piece=piece)
    sdk, lean = await both(wire_server, framed, build, request())
    wire_server.queue(plain)
    reference = await observe(build("lean"), request())

    assert lean == sdk
    if sdk[0] == "error":  # only Anthropic's message_stop dropped with its unterminated record
        assert name.startswith("anthropic") and framing.startswith("unterminated"), sdk
        assert "stream ended before message_stop" in sdk[4]
        return
    assert lean[2:] == reference[2:]  # message, usage, stop reason, model
    assert "".join(lean[1]) == "".join(reference[1])  # the same text, however it was cut


OPENAI_ERRORS = [
    Reply(status=429, headers={"retry-after-ms": "250"}, body={"error": {"message": "rate"}}),
    Reply(status=503, text=b"<html>unavailable</html>"),
    Reply(status=400, body={"error": {"type": "invalid_request_error", "message": "bad"}}),
    Reply(status=404, body={"error": {"message": "", "type": "invalid_request_error"}}),
]


@pytest.mark.parametrize(
    "reply",
    [recorded("openai_text.sse"), recorded("openai_tool_call.sse"), *OPENAI_ERRORS],
    ids=["text", "tool_call", "429", "503-text", "400", "404"],
)
async def test_openai_transports_agree(
    wire_server: WireServer, reply: Reply, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_ORG_ID", "org-1")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-1")

    def build(transport: Transport) -> OpenAIModel:
        url = wire_server.url + "/v1"
        return OpenAIModel("gpt-x", api_key="k-2", base_url=url, transport=transport)

    sdk, lean = await both(wire_server, reply, build, request())

    assert lean == sdk
    sent_sdk, sent_lean = wire_server.requests
    assert sent_lean.raw == sent_sdk.raw
    assert sent_lean.path == sent_sdk.path == "/v1/chat/completions"
    for header in ("authorization", "openai-organization", "openai-project", "content-type"):
        assert sent_lean.headers[header] == sent_sdk.headers[header], header


async def test_openai_stream_error_chunks_agree(wire_server: WireServer) -> None:
    def build(transport: Transport) -> OpenAIModel:
        url = wire_server.url + "/v1"
        return OpenAIModel("gpt-x", api_key="k", base_url=url, transport=transport)

    reply = OpenAIWire(wire_server).reply(text="partial")
    assert reply.events is not None
    error = {"error": {"type": "server_error", "message": "boom", "code": None}}
    reply.events = [reply.events[0], (None, error)]
    sdk, lean = await both(wire_server, reply, build, request())

    assert lean == sdk
    assert lean[1] == "api_error"


def _openai_build(server: WireServer) -> Any:
    def build(transport: Transport) -> OpenAIModel:
        url = server.url + "/v1"
        return OpenAIModel("gpt-x", api_key="k", base_url=url, transport=transport)

    return build


async def test_openai_finish_chunks_read_by_their_bytes_agree_stream_after_stream(
    wire_server: WireServer,
) -> None:
    """A chunk that only ends the stream is looked up by its bytes after the opening once
    one has been parsed (``openai._learn_finish``): every stream's finish reason is still its
    own — another reason, a finish chunk carrying text or usage, another index — on both
    transports, one stream after another."""
    body = (RECORDED / "openai_text.sse").read_bytes()
    finish = b'"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]'
    assert finish in body
    variants = [
        b"",
        b'"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]',
        b"",
        b'"choices":[{"index":0,"delta":{"content":"!"},"logprobs":null,"finish_reason":"stop"}]',
        b'"choices":[{"index":1,"delta":{},"logprobs":null,"finish_reason":"length"}]',
        b'"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"content_filter"}]',
        b'"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]',
    ]
    stops = []
    for variant in variants:
        reply = Reply(sse=body.replace(finish, variant) if variant else body)
        sdk, lean = await both(wire_server, reply, _openai_build(wire_server), request())
        assert lean == sdk
        stops.append(lean[4] if lean[0] == "done" else lean[1])
    assert stops == [
        "end_turn",
        "max_tokens",
        "end_turn",
        "end_turn",
        "connection",  # index 1 only: no finish_reason for choice 0
        "content_filter",
        "max_tokens",
    ]


async def test_openai_first_chunks_read_by_their_bytes_agree_stream_after_stream(
    wire_server: WireServer,
) -> None:
    """A first chunk that does nothing (the role) is looked up by its bytes after its own
    proven opening once one has been parsed (``openai._learn_idle``): each stream's id, a
    first chunk carrying text, usage or another member, and an opening that changes after
    the first chunk read as the SDK reads them, one after another (a first chunk that is not
    JSON: ``test_a_first_chunk_that_does_nothing_is_read_by_its_bytes_as_when_parsed_whole``;
    the SDK raises its ``json`` error raw)."""
    body = (RECORDED / "openai_text.sse").read_bytes()
    stream_id = b"chatcmpl-C9kqX4p2nLw8YbTgZr1H"
    role = b'"delta":{"role":"assistant","content":"","refusal":null}'
    assert body.count(stream_id) > 3 and body.count(role) == 1
    first_end = body.index(b"\n\n")

    def first(new: bytes) -> bytes:  # the first chunk's rest changed
        return body[:first_end].replace(role, new) + body[first_end:]

    variants = [
        body,  # learnt
        body.replace(stream_id, b"chatcmpl-second"),  # looked up after another opening
        first(b'"delta":{"role":"assistant","content":"Hi, ","refusal":null}'),
        body.replace(stream_id, b"chatcmpl-third", 1),  # the opening changes after it
        first(role + b',"usage":null'),
        body[:first_end].replace(b'"usage":null}', b'"usage":{"prompt_tokens":3}}')
        + body[first_end:],
        first(role.replace(b'"content":""', b'"content":null')),
        body.replace(stream_id, b"chatcmpl-fourth"),
    ]
    seen = []
    for variant in variants:
        sdk, lean = await both(
            wire_server, Reply(sse=variant), _openai_build(wire_server), request()
        )
        assert lean == sdk
        seen.append(lean[0])
    assert seen == ["done"] * len(variants)


def _records(name: str) -> list[bytes]:
    """A recorded stream's records, each with its blank line: one HTTP chunk each."""
    return [record + b"\n\n" for record in (RECORDED / name).read_bytes().split(b"\n\n")[:-1]]


async def streamed_and_responded(
    server: WireServer, reply: Reply, build: Any, call: ModelRequest
) -> list[Any]:
    """What ``stream`` (deltas and the final event) and ``respond`` (the final event: the
    lean transport reads the chunks as they came, ``feed_pieces``) give on each transport."""
    seen: list[Any] = []
    for transport in ("sdk", "lean"):
        server.queue(reply)
        seen.append(await observe(build(transport), call))
        server.queue(reply)
        model = build(transport)
        try:
            done = await model.respond(call)
            seen.append((done.message, done.usage, done.stop_reason, done.model))
        except ModelError as error:
            seen.append(("error", error.kind, str(error)))
        finally:
            await model.aclose()
    return seen


# Chunks a server may send between records: blank lines only, or lines that are no field the
# SSE reading knows (no ``data``), one of them a JSON string followed by what a run's record
# ends with. Read as SSE, none of them is anything. Before, ``feed_pieces`` took a chunk that
# started with the assemblers' "no run" prefix (OpenAI: an LF; Anthropic: a blank line) and
# ended with a run's end for a run's record: its string became text (Anthropic: the last text
# block's), or a chunk of a blank line alone failed an assert (OpenAI).
STRAY_OPENAI = [b"\n\n", b"\n\n\n", b'\n"stray"\n\n', b'\n"x"\n\n\n\n']
STRAY_ANTHROPIC = [b'\n\n"stray"}}\n\n', b"\n\n\n\n", b'\n\n\n"x"}}\n\n']


@pytest.mark.parametrize("stray", STRAY_OPENAI)
async def test_openai_stray_chunks_before_any_run_read_as_the_sdk_reads_them(
    wire_server: WireServer, stray: bytes
) -> None:
    chunks = _records("openai_text.sse")
    for at in (0, 1, len(chunks) - 2):
        reply = Reply(chunks=[*chunks[:at], stray, *chunks[at:]])
        sdk, sdk_done, lean, lean_done = await streamed_and_responded(
            wire_server, reply, _openai_build(wire_server), request()
        )
        assert sdk[0] == "done"
        assert (lean, lean_done) == (sdk, sdk_done), (at, stray)


@pytest.mark.parametrize("stray", STRAY_ANTHROPIC)
async def test_anthropic_stray_chunks_where_no_run_is_read_as_the_sdk_reads_them(
    wire_server: WireServer, stray: bytes
) -> None:
    """Where no run is: before the first block, and in a thinking block after a text block
    (the run's block is then still the text block)."""
    chunks = _records("anthropic_text.sse")
    stop = next(i for i, c in enumerate(chunks) if c.startswith(b"event: message_delta"))
    thinking = [
        b'event: content_block_start\ndata: {"type":"content_block_start","index":1,'
        b'"content_block":{"type":"thinking","thinking":""}}\n\n',
        stray,
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":1}\n\n',
    ]

    def build(transport: Transport) -> AnthropicModel:
        return AnthropicModel(
            "claude-x", api_key="k-1", base_url=wire_server.url, transport=transport
        )

    for body in ([stray, *chunks], [*chunks[:stop], *thinking, *chunks[stop:]]):
        sdk, sdk_done, lean, lean_done = await streamed_and_responded(
            wire_server, Reply(chunks=body), build, request()
        )
        assert sdk[0] == "done"
        assert (lean, lean_done) == (sdk, sdk_done), (body, stray)


async def test_an_openai_finish_chunk_after_a_blank_line_before_the_first_chunk_is_no_finish(
    wire_server: WireServer,
) -> None:
    """A chunk of a blank line, then the bytes a finish chunk has after its opening, then a
    blank line: no data line, so nothing to the SSE reading. Before, ahead of the first chunk
    (no opening proven) it was looked up as a finish chunk once a stream had taught that one,
    and a stream whose own finish chunk never came read as finished."""
    chunks = _records("openai_text.sse")
    finish = next(i for i, c in enumerate(chunks) if b'"finish_reason":"stop"' in c)
    rest = chunks[finish][chunks[finish].index(b'"choices":') : -2]
    build = _openai_build(wire_server)
    for body in (
        chunks,  # teaches the finish chunk's bytes
        [b"\n\n" + rest + b"\n\n", *chunks[:finish], *chunks[finish + 1 :]],
    ):
        sdk, sdk_done, lean, lean_done = await streamed_and_responded(
            wire_server, Reply(chunks=body), build, request()
        )
        assert (lean, lean_done) == (sdk, sdk_done), body
    assert sdk[:2] == ("error", "connection")
