"""The Anthropic provider: the Messages API through the official ``anthropic`` SDK, streamed.

Our messages are already Anthropic-shaped, so the request is mostly a copy. What we add:

* **Prompt caching.** Three ``cache_control: ephemeral`` breakpoints: the system prompt, the last
  tool, and the last content block of the last message. Every call therefore writes the whole
  conversation to the cache, and the next call (one turn later, or a fork whose history starts
  with the parent's exact bytes) reads that prefix back. The breakpoints are placed on copies;
  the agent's history and a fork's shared tool array are never mutated.
* **Thinking.** ``request.thinking`` is passed as the ``thinking`` parameter; thinking blocks come
  back with their signature so they can be sent again on the next turn.
* **Streaming.** Raw stream events are assembled here (not by the SDK's helper) so that a stream
  that ends without ``message_stop`` — a dropped connection — is an error, never a short answer.
* **Two transports.** By default requests go over the lean transport (``_lean``: our HTTP/1.1
  client and SSE decoder, ~10 times cheaper per call, and no SDK import at all); the official SDK is
  the reference and the fallback for what only it handles (a caller's own client, proxies,
  credential profiles). Both feed the same ``StreamAssembler`` with each event's JSON.

Neither transport retries (the SDK client is built with ``max_retries=0``): ``ModelCaller`` owns
retries and backoff, and needs every error raw (``_sdk_support`` maps them to kinds).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, cast

import orjson

from subagents.messages import ContentBlock, Message, Usage, usage_of
from subagents.models._http import Origin
from subagents.models._lean import (
    USER_AGENT,
    HTTPProvider,
    LeanEndpoint,
    PieceReading,
    StreamErrorEvent,
    Transport,
    choose_transport,
    header_lines,
    not_json,
    parse_error_body,
    string_run,
)
from subagents.models._sdk_bounds import bounded_http_client
from subagents.models._sdk_support import (
    EPHEMERAL,
    load_sdk,
    parse_tool_arguments,
)
from subagents.models._sse import parse_record, piece_event, piece_records
from subagents.models.base import MessageDone, ModelError, ModelRequest, message_done
from subagents.models.wire_tools import WireTools

ANTHROPIC_API_VERSION = "2026-10-21"
"""The ``anthropic-version`` header; pinned to the SDK's own (a wire test compares them)."""
DEFAULT_BASE_URL = "https://api.anthropic.com"


WIRE_TOOLS = WireTools(lambda tools: cached_tools(tools))
"""Each agent's tool list as the Messages API takes it, made once per list."""


class AnthropicModel(HTTPProvider):
    """A Claude model behind the Messages API. ``client`` may be any ``AsyncAnthropic``.

    Requests go over the lean transport (``_lean``) unless ``client`` is given or the SDK is
    needed (``choose_transport``); ``transport`` forces one. The key is ``api_key``, else
    ``ANTHROPIC_API_KEY``, else ``ANTHROPIC_AUTH_TOKEN``, sent as the SDK sends it; the URL is
    ``base_url``, else ``ANTHROPIC_BASE_URL``; ``ANTHROPIC_CUSTOM_HEADERS`` adds header lines.
    """

    provider = "anthropic"
    wire_tools = WIRE_TOOLS
    sdk_module = "anthropic"

    def __init__(
        self,
        name: str,
        *,
        client: Any = None,
        api_key: str | None = None,
        base_url: str | None = None,
        transport: Transport | None = None,
        _endpoint: LeanEndpoint | None = None,
    ) -> None:
        self.name = name
        self.label = f"anthropic model {name!r}"
        self.client: Any = client
        self._endpoint = _endpoint
        if client is None and _endpoint is None:
            key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
            token = None if key else os.environ.get("ANTHROPIC_AUTH_TOKEN") or None
            url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
            chosen = transport or choose_transport(
                has_client=False, has_static_credential=bool(key or token), base_url=url
            )
            if chosen == "lean":
                self._endpoint = _lean_endpoint(url, key or token or "")
            else:
                sdk = load_sdk("anthropic", "anthropic")
                self.client = sdk.AsyncAnthropic(
                    api_key=api_key,
                    base_url=base_url,
                    max_retries=0,
                    http_client=bounded_http_client(sdk),
                )

    def with_model_id(self, model_id: str) -> AnthropicModel:
        """A sibling for another Claude model, sharing this one's client (and its connections)."""
        return AnthropicModel(model_id, client=self.client, _endpoint=self._endpoint)

    def body(self, request: ModelRequest) -> dict[str, Any]:
        return build_params(request, self.name)

    def assembler(self) -> StreamAssembler:
        return StreamAssembler()

    def status_message(
        self, status: int, raw: bytes, path: str, headers: Mapping[str, str]
    ) -> tuple[str, object]:
        return status_message(status, raw, path, headers)

    def event_message(
        self, status: int, event: StreamErrorEvent, path: str, headers: Mapping[str, str]
    ) -> str:
        return sdk_error_text(status, event.body, path, headers)

    def sdk_create(self, params: dict[str, Any]) -> Awaitable[Any]:
        result: Awaitable[Any] = self.client.messages.create(**params)
        return result


def _lean_endpoint(base_url: str, credential: str) -> LeanEndpoint:
    headers = {
        "Accept": "application/json",
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "anthropic-version": ANTHROPIC_API_VERSION,
        **custom_headers(os.environ.get("ANTHROPIC_CUSTOM_HEADERS")),
        # The SDK sends a key or a token the same way (``AsyncAnthropic.auth_headers``).
        "Authorization": f"Bearer {credential}",
    }
    return LeanEndpoint(
        origin=Origin.parse(base_url), path="/v1/messages", headers=header_lines(headers)
    )


def custom_headers(raw: str | None) -> dict[str, str]:
    """``ANTHROPIC_CUSTOM_HEADERS``: ``Name: value`` lines, parsed as the SDK parses them."""
    parsed: dict[str, str] = {}
    for line in (raw or "").split("\n"):
        name, colon, value = line.partition(":")
        if colon and name.strip():
            parsed[name.strip()] = value.strip()
    return parsed


def status_message(
    status: int, raw: bytes, path: str, headers: Mapping[str, str]
) -> tuple[str, object]:
    """An error response's text and body as the SDK words and parses them (``sdk_error_text``
    of its JSON, else of its stripped text)."""
    text, parsed = parse_error_body(raw)
    body = text if parsed is None else parsed
    return sdk_error_text(status, body, path, headers), body


def sdk_error_text(status: int, body: object, path: str, headers: Mapping[str, str]) -> str:
    """An API error as the SDK (anthropic >= 2.17, ``make_status_error``) words it:
    ``<status> <error.message>`` (the status left out inside a 200 stream; the body's compact
    JSON when it has no message; ``status code (no body)`` when it is empty), then the error
    code, request id, path and error type that are present, in parentheses, then the error's
    details as indented JSON when they hold more than the error code."""
    error = _mapping(body.get("error")) if isinstance(body, dict) else None
    message = error.get("message") if error is not None else None
    text = _text(message) or _text(body)
    details = error.get("details") if error is not None and text else None
    if text is None and body == "":
        head = f"{status} status code (no body)"
    else:
        text = text or _json_text(body, None)
        head = f"{status} {text}" if status >= 400 else text
    code = _mapping(error.get("details")) if error is not None else None
    request_id = headers.get("request-id") or (
        body.get("request_id") if isinstance(body, dict) else None
    )
    values = (
        ("error_code", _text(code.get("error_code")) if code is not None else None),
        ("request_id", _text(request_id)),
        ("path", path.partition("?")[0]),
        ("type", _text(error.get("type")) if error is not None else None),
    )
    items = ", ".join(f"{label}: {value}" for label, value in values if value)
    head = f"{head} ({items})"
    if details is not None and (not isinstance(details, dict) or details.keys() - {"error_code"}):
        head += "\n\n" + _json_text(details, 2)
    return head


def _mapping(value: object) -> dict[str, Any] | None:
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None


def _text(value: object) -> str | None:
    """A non-empty string, else None (the SDK's ``first_non_empty_string`` of one value)."""
    return value if isinstance(value, str) and value else None


def _json_text(value: object, indent: int | None) -> str:
    """``json.dumps`` as the SDK calls it (only an error's text needs it: imported here)."""
    import json

    if indent is None:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return json.dumps(value, indent=indent, ensure_ascii=False)


def build_params(request: ModelRequest, model: str) -> dict[str, Any]:
    """The ``messages.create`` arguments for ``request``, cache breakpoints included, in the
    order the SDK writes them to the wire (so both transports send the same bytes)."""
    params: dict[str, Any] = {
        "max_tokens": request.max_tokens,
        "messages": cached_messages(request.messages),
        "model": model,
        "stream": True,
    }
    if request.system:
        params["system"] = [{"type": "text", "text": request.system, "cache_control": EPHEMERAL}]
    if request.thinking:
        params["thinking"] = request.thinking
    if request.tools:
        params["tools"] = WIRE_TOOLS.dicts(request.tools)
    return params


def cached_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """Tool dicts with a breakpoint on the last; accepts ``ToolSchema``s or ready dicts."""
    out = [dict(t.to_dict()) if hasattr(t, "to_dict") else dict(t) for t in tools]
    out[-1]["cache_control"] = EPHEMERAL
    return out


def cached_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The history with a breakpoint on the last cacheable block of the last message.

    Thinking blocks cannot carry ``cache_control``, and an empty text cannot be cached, so the
    breakpoint goes on the last block that can take it. Only the last message is copied (the
    others are sent as they are, and nothing changes them): copying every message of a long
    history was a share of each call.
    """
    # (A quoted type: ``list[dict[str, Any]]`` would build two generic aliases per call.)
    out = cast("list[dict[str, Any]]", list(messages))
    if not out:
        return out
    last = out[-1] = dict(out[-1])
    content = last["content"]
    blocks: list[dict[str, Any]] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    )
    for index in range(len(blocks) - 1, -1, -1):
        block = blocks[index]
        if block.get("type") in ("thinking", "redacted_thinking"):
            continue
        if block.get("type") == "text" and not block.get("text"):
            continue
        blocks[index] = {**block, "cache_control": EPHEMERAL}
        last["content"] = blocks
        break
    return out


USAGE_KEYS = tuple(Usage().to_dict())
"""The counters ``_merge_usage`` keeps (``done`` sets each of them on a ``Usage``)."""


_NO_RUN = b"\n\n"
"""A prefix no record starts with (a record holds no blank line)."""


def _run_prefix(index: int, text: bool) -> bytes:
    """A delta record to block ``index``, as the Messages API writes it, up to its string."""
    prefix = _RUN_PREFIXES.get((index, text))
    if prefix is None:
        kind = b'"text_delta","text":' if text else b'"input_json_delta","partial_json":'
        prefix = (
            b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
            b'"delta":{"type":%s' % (index, kind)
        )
        if len(_RUN_PREFIXES) < 256:
            _RUN_PREFIXES[index, text] = prefix
    return prefix


_RUN_PREFIXES: dict[tuple[int, bool], bytes] = {}


def _known_records() -> dict[bytes, tuple[str, int]]:
    """Records the Messages API sends as these exact bytes, and what each does: nothing
    (``ping``), end the message, finish block N (``stop``), start an empty text block N."""
    known = {
        b'event: ping\ndata: {"type":"ping"}': ("ping", 0),
        b'event: message_stop\ndata: {"type":"message_stop"}': ("message_stop", 0),
    }
    for index in range(_KNOWN_BLOCKS):
        stop = b'event: content_block_stop\ndata: {"type":"content_block_stop","index":%d}'
        known[stop % index] = ("stop", index)
        start = (
            b'event: content_block_start\ndata: {"type":"content_block_start","index":%d,'
            b'"content_block":{"type":"text","text":""}}'
        )
        known[start % index] = ("start", index)
    return known


_DELTA_LINE = b"event: message_delta\n"
_DELTA_HEADS = {
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"%s",'
    b'"stop_sequence":null}' % reason.encode(): reason
    for reason in ("end_turn", "tool_use", "max_tokens", "pause_turn", "refusal")
}
"""A ``message_delta`` record up to its usage, as the API writes it, and its stop reason."""

_KNOWN_BLOCKS = 16
_KNOWN_RECORDS = _known_records()
_KNOWN_PIECES = {record + b"\n\n": action for record, action in _KNOWN_RECORDS.items()}
"""The known records with their blank line: the data of a chunk that holds one of them."""


class StreamAssembler(PieceReading):
    """Builds the assistant message, usage and stop reason from Messages stream events, each
    the event's JSON as a dict (the lean transport parses it; the SDK path dumps its objects).

    A block's text and thinking deltas are kept as pieces (``texts``, ``thinking``) and joined
    into the block once (at a new start of the same block and at ``done``): adding each delta
    to the block's string made a long answer's (or a long thinking's) assembly quadratic.

    A plain class: one is made per model call, and a dataclass's ``__init__`` with its default
    factories cost twice this one's."""

    __slots__ = (
        "blocks",
        "partial_json",
        "run_index",
        "run_prefix",
        "run_text",
        "stop_reason",
        "stopped",
        "texts",
        "thinking",
        "usage",
    )

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial_json: dict[int, list[str]] = {}
        self.texts: dict[int, list[str]] = {}
        self.thinking: dict[int, list[str]] = {}
        self.usage: dict[str, int] = {}
        self.stop_reason = "end_turn"
        self.stopped = False
        self.run_prefix = _NO_RUN
        """The bytes a delta record to the block last started opens with, up to its string
        (``_run_prefix``); ``feed_records`` reads runs of such records without parsing each."""
        self.run_index = -1
        self.run_text = False
        """Whether the run's strings are text (else a tool's input JSON)."""

    def feed_records(self, records: list[bytes]) -> list[str]:
        """SSE records (``SSEDecoder.records``); returns the texts to show live.

        A run of deltas to the block last started — text or tool input, most of a stream — is
        read straight from the records' bytes: each is ``run_prefix + STRING + "}}"``, and the
        run's strings are parsed in one ``orjson`` call and applied at once (``_apply_run``).
        A record the API sends byte for byte the same every time (``_KNOWN_RECORDS``: a ping,
        a block's stop, an empty text block's start, the message's stop) is looked up whole
        and applied as its parse would be. Every other record is parsed and applied as the SDK
        would (``_feed_event``); ``tests/wire/test_lean_records.py`` checks that all three
        readings give what that one gives alone, on streams split, cut and corrupted."""
        shown: list[str] = []
        self._read(records, shown, False)
        return shown

    # ``feed_pieces`` (``_lean.PieceReading``): the data of a network read's HTTP chunks
    # (``Response.each``), read as ``feed_records(decoder.records(b"".join(pieces)))`` reads them,
    # without that join and split when each chunk ends its records (the APIs send one record per
    # chunk): while the decoder ``resumes()``, a piece read by a run or a look-up is one record
    # and its blank line (below), any other is read by ``_sse.piece_records``, and from the first
    # piece that does not end its records the rest goes through ``decoder``.  A piece a run takes
    # is ``run_prefix + S + "}}\n\n"`` with S holding no LF or CR (``_lean.string_run``), and a
    # looked-up one a known record + ``"\n\n"``: neither holds a blank line but its last, nor a
    # CR, nor an LF before that blank line, so it is exactly one record to the decoder, which
    # resumes after it.

    def _read(self, items: list[bytes], shown: list[str], ended: bool) -> int:
        """``feed_records`` of ``items`` — records, or (``ended``) pieces each ending its
        records (``feed_pieces``) — up to the first piece that does not; returns how many
        items were read."""
        prefix, size = self.run_prefix, len(self.run_prefix)
        end, cut = (b"}}\n\n", -4) if ended else (b"}}", -2)
        known_records = _KNOWN_PIECES if ended else _KNOWN_RECORDS
        run: list[bytes] = []
        for at, item in enumerate(items):
            if item[:size] == prefix and item[cut:] == end:
                run.append(item[size:cut])
                continue
            if run:
                self._apply_run(run, shown, ended)
                run = []
                # A run read record by record may have started a block (and so changed the
                # run's prefix): a later record is matched against the prefix as it is now.
                prefix, size = self.run_prefix, len(self.run_prefix)
            known = known_records.get(item)
            if known is not None:
                kind, index = known
                if kind == "stop":
                    self._finish_block(index)
                elif kind == "start":
                    self._join_text(index)
                    self.blocks[index] = {"type": "text", "text": ""}
                    self._expect_run(index, "text")
                elif kind == "message_stop":
                    self.stopped = True
            elif item[:21] == _DELTA_LINE and self._read_delta(item, ended):
                pass  # the message's delta, read as its parse reads it
            elif not ended:
                event = parse_record(item)
                if event is None:
                    continue
                self._feed_event(event[0], event[1], shown)
            elif (event := piece_event(item)) is not None:  # the usual shape, inline
                self._feed_event(event[0], event[1], shown)
            else:
                records = piece_records(item)
                if records is None:
                    return at
                # Its records as the decoder's would be read (runs and look-ups too: a body
                # not chunked is one piece per read, of many records)
                self._read(records, shown, False)
            prefix, size = self.run_prefix, len(self.run_prefix)
        if run:
            self._apply_run(run, shown, ended)
        return len(items)

    def _read_delta(self, item: bytes, ended: bool) -> bool:
        """Apply a ``message_delta`` record (``ended``: a piece, the record and its blank line)
        as its parse would be, parsing only its usage, when it is one of the API's usual
        heads (``_DELTA_HEADS``: a stop reason, a null stop sequence) + ``,"usage":`` + U +
        ``}``, with U one line of JSON on its own; else False (it is read as before).

        Why this is its parse: the head is a fixed event line and the opening of a data
        line's JSON up to the ``usage`` value; if U parses alone (one JSON value, nothing
        after it) the parser, after the head, reads exactly that value and then the closing
        ``}``: the record is ``{"type": "message_delta", "delta": {"stop_reason": R,
        "stop_sequence": None}, "usage": U}``, and ``feed`` sets the stop reason and merges
        the usage. U holds no LF and no CR, so the piece (head, U and ``}\n\n``) holds no
        blank line but its last and no CR: exactly one record to the decoder, which resumes
        after it (the note above ``_read``)."""
        head, _, tail = item.partition(b',"usage":')
        stop = _DELTA_HEADS.get(head)
        cut = -3 if ended else -1
        if stop is None or tail[cut:] != (b"}\n\n" if ended else b"}"):
            return False
        value = tail[:cut]
        if value.find(b"\n") >= 0 or value.find(b"\r") >= 0:
            return False
        try:
            usage = orjson.loads(value)
        except orjson.JSONDecodeError:
            return False  # read whole, it fails as it would
        self.stop_reason = stop
        self._merge_usage(usage)
        return True

    def _feed_event(self, name: str | None, data: bytes, shown: list[str]) -> None:
        """One record as the SDK reads it: unnamed records and pings are skipped, an ``error``
        record ends the stream with the error it carries; a tool input's delta after its
        block's first (whose block and piece list then exist) is applied inline."""
        if name is None or name == "ping" or not data:
            return
        if name == "error":
            raise _stream_error(data)
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise not_json(data) from None
        if event.get("type") == "content_block_delta":
            index, delta = event["index"], event["delta"]
            json_pieces = self.partial_json.get(index)
            if delta.get("type") == "input_json_delta" and json_pieces is not None:
                json_pieces.append(delta["partial_json"])
                return
            text = self._apply_delta(index, delta)
        else:
            text = self.feed(event)
        if text is not None:
            shown.append(text)

    def _apply_run(self, run: list[bytes], shown: list[str], ended: bool) -> None:
        """Apply deltas whose records were ``run_prefix + piece + "}}"`` each, as
        ``_feed_event`` would one by one.

        Why one parse is the same as one per record: the pieces come from records with no blank
        line inside, and ``_lean.string_run`` proves each is exactly one JSON string. Then each
        record,
        ``run_prefix`` (an event line and a data line up to the delta's string, which the
        prefix is built to end at) + that string + ``}}``, is one data line whose JSON holds
        exactly that string there. Anything else (a piece that is not a lone string, a LF,
        invalid UTF-8) is fed record by record, failing as it would have (``ended``: each
        record with its blank line, a piece, read by ``_sse.piece_records``, which reads all
        of it: it ends with ``}}\n\n``). With no run (``_NO_RUN``, which no record starts
        with but a piece may: a chunk's data opening with a blank line) the pieces are no
        deltas: read as they came, never as strings of the last run's block."""
        parsed = string_run(run) if self.run_prefix is not _NO_RUN else None
        if parsed is not None:
            values, text = parsed
            index = self.run_index
            if self.run_text:
                pieces = self.texts.get(index)
                if pieces is None:
                    pieces = self._text_pieces(index)
                pieces.append(text)
                shown += values
                return
            pieces = self.partial_json.get(index)
            if pieces is None:
                self.blocks.setdefault(index, {"type": "text", "text": ""})
                pieces = self.partial_json[index] = []
            pieces.append(text)
            return
        prefix = self.run_prefix
        for piece in run:
            if ended:  # the piece as it came; what it holds, record by record
                found = piece_records(prefix + piece + b"}}\n\n")
                assert found is not None  # it ends with "}}\n\n": it ends its records
                records = found
            else:
                records = [prefix + piece + b"}}"]  # the record as it came
            for record in records:
                event = parse_record(record)
                if event is not None:
                    self._feed_event(event[0], event[1], shown)

    def feed(self, event: dict[str, Any]) -> str | None:
        """Apply one event; returns text to show live, if the event carried some."""
        kind = event.get("type")
        if kind == "content_block_delta":
            return self._apply_delta(event["index"], event["delta"])
        if kind == "message_start":
            self._merge_usage(event["message"].get("usage"))
        elif kind == "content_block_start":
            index = event["index"]
            self._join_text(index)
            block = self.blocks[index] = start_block(event["content_block"])
            self._expect_run(index, block.get("type"))
        elif kind == "content_block_stop":
            self._finish_block(event["index"])
        elif kind == "message_delta":
            stop = event["delta"].get("stop_reason")
            if stop:
                self.stop_reason = stop
            self._merge_usage(event.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        return None

    def done(self, model: str, label: str) -> MessageDone:
        if not self.stopped:
            raise ModelError("connection", f"{label}: stream ended before message_stop")
        if self.texts or self.thinking:
            for index in [*self.texts, *self.thinking]:
                self._join_text(index)
        # An empty text block is legal in a response but rejected when sent back next turn.
        blocks = self.blocks
        content = cast(
            "list[ContentBlock]",  # quoted: no generic alias built per call
            [
                block
                for block in map(blocks.__getitem__, sorted(blocks))
                if block.get("text") or block.get("type") != "text"
            ],
        )
        message: Message = {"role": "assistant", "content": content}
        counters = self.usage
        usage = usage_of(
            counters.get("input_tokens", 0),
            counters.get("output_tokens", 0),
            counters.get("cache_creation_input_tokens", 0),
            counters.get("cache_read_input_tokens", 0),
        )
        return message_done(message, usage, self.stop_reason, model)

    def _apply_delta(self, index: int, delta: dict[str, Any]) -> str | None:
        kind = delta.get("type")
        if kind == "text_delta":
            text: str = delta["text"]
            pieces = self.texts.get(index)
            if pieces is None:
                pieces = self._text_pieces(index)
            pieces.append(text)
            return text
        block = self.blocks.get(index)
        if block is None:
            block = self.blocks[index] = {"type": "text", "text": ""}
        if kind == "input_json_delta":
            self.partial_json.setdefault(index, []).append(delta["partial_json"])
        elif kind == "thinking_delta":
            pieces = self.thinking.get(index)
            if pieces is None:
                pieces = self.thinking[index] = []
            pieces.append(delta["thinking"])
        elif kind == "signature_delta":
            block["signature"] = delta["signature"]
        return None

    def _expect_run(self, index: object, kind: object) -> None:
        """After a block's start: its deltas' records are what a run is made of."""
        if type(index) is int and (kind == "text" or kind == "tool_use"):
            text = kind == "text"
            self.run_prefix = _run_prefix(index, text)
            self.run_index, self.run_text = index, text
        else:
            self.run_prefix = _NO_RUN

    def _text_pieces(self, index: int) -> list[str]:
        """The text pieces of block ``index`` (a delta before its start makes a text block)."""
        self.blocks.setdefault(index, {"type": "text", "text": ""})
        pieces: list[str] = self.texts.setdefault(index, [])
        return pieces

    def _join_text(self, index: int) -> None:
        """Block ``index``'s text and thinking pieces, joined onto the block."""
        pieces = self.texts.pop(index, None)
        if pieces:
            block = self.blocks[index]
            block["text"] = block.get("text", "") + "".join(pieces)
        if self.thinking:
            pieces = self.thinking.pop(index, None)
            if pieces:
                block = self.blocks[index]
                block["thinking"] = block.get("thinking", "") + "".join(pieces)

    def _finish_block(self, index: int) -> None:
        block = self.blocks.get(index)
        if block is not None and block.get("type") == "tool_use" and index in self.partial_json:
            block["input"] = parse_tool_arguments("".join(self.partial_json.pop(index)))

    def _merge_usage(self, usage: dict[str, Any] | None) -> None:
        """Counters are cumulative: a later non-null value replaces an earlier one.

        The four counters (``USAGE_KEYS``) written out, not looped over: a loop's steps were
        half of this, which runs twice per call (``message_start``, ``message_delta``)."""
        if not usage:
            return
        counters = self.usage
        value = usage.get("input_tokens")
        if value is not None:
            counters["input_tokens"] = value if type(value) is int else int(value)
        value = usage.get("output_tokens")
        if value is not None:
            counters["output_tokens"] = value if type(value) is int else int(value)
        value = usage.get("cache_creation_input_tokens")
        if value is not None:
            counters["cache_creation_input_tokens"] = value if type(value) is int else int(value)
        value = usage.get("cache_read_input_tokens")
        if value is not None:
            counters["cache_read_input_tokens"] = value if type(value) is int else int(value)


def _stream_error(data: bytes) -> StreamErrorEvent:
    """An ``error`` record: its JSON body (else its text), worded by ``sdk_error_text`` once the
    response's status, path and headers are at hand (``AnthropicModel.event_message``)."""
    text = data.decode("utf-8", "replace")
    try:
        body: object = orjson.loads(data)
    except orjson.JSONDecodeError:
        return StreamErrorEvent(text or "Error code: 200", text, with_status=True)
    return StreamErrorEvent(f"{body}", body, with_status=True)


def start_block(block: dict[str, Any]) -> dict[str, Any]:
    """Our dict for a ``content_block_start`` block; unknown kinds are kept as the API sent them."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block.get("text") or ""}
    if kind == "thinking":
        started: dict[str, Any] = {"type": "thinking", "thinking": block.get("thinking") or ""}
        if block.get("signature"):
            started["signature"] = block["signature"]
        return started
    if kind == "tool_use":
        return {
            "type": "tool_use",
            "id": block["id"],
            "name": block["name"],
            "input": block.get("input") or {},
        }
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block["data"]}
    return {key: value for key, value in block.items() if value is not None}
