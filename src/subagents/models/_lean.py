"""The lean transport both providers share: our HTTP client, our SSE decoder, no SDK.

The official SDK path (``_sdk_support.relay``) stays the reference: for the same recorded
stream or error response, this path must give the same ``MessageDone`` or the same
``ModelError`` (kind, status, retry-after and message), which ``tests/wire/test_lean_parity.py``
checks on one local server for both. What differs is cost: one streamed call here is a request
written from ready header bytes and an ``orjson`` body, whole network reads decoded at once,
and each event's JSON parsed once into the dict the assembler reads — against the SDK's
pydantic request options, ``httpx``/``h11`` per-chunk parsing and a typed object per event.

The SDK path is used instead (see ``choose_transport``) when the model was given an SDK client,
when ``SUBAGENTS_HTTP=sdk``, when a proxy applies to the base URL, or when the credential is not
one this path can send (the SDKs' credential profiles and token exchange).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import orjson

from subagents.abort import AbortSignal
from subagents.models._http import (
    READ_TIMEOUT_S,
    HTTPClient,
    HTTPTransportError,
    Origin,
    Response,
    lean_transport_allowed,
)
from subagents.models._sdk_support import (
    Assembler,
    abort_scope,
    clip,
    load_sdk,
    relay,
    status_error,
    stream_error_kind,
)
from subagents.models._sse import SSEDecoder
from subagents.models.base import (
    MessageDone,
    ModelError,
    ModelRequest,
    StreamEvent,
    TextDelta,
    drain,
)
from subagents.models.wire_tools import WireTools

Transport = Literal["lean", "sdk"]
USER_AGENT = "subagents/0.1 (lean HTTP)"


class StreamErrorEvent(Exception):
    """An error inside a 200 stream, worded as the SDK words it. ``with_status``: the SDK
    reports it as a status error of the 200 response (Anthropic; its headers may carry a
    retry-after), else as a bare API error (OpenAI)."""

    def __init__(self, message: str, body: object, *, with_status: bool) -> None:
        super().__init__(message)
        self.body = body
        self.with_status = with_status


class WireAssembler(Assembler, Protocol):
    """Builds one assistant message from a stream's events: SDK objects' dicts (``feed``) or
    the raw SSE records of one network read (``feed_records``, which returns the texts to
    show), or that read's HTTP chunks as they came (``feed_pieces``: the same, read through
    ``decoder`` where a chunk does not end its records)."""

    def feed_records(self, records: list[bytes], /) -> list[str]: ...

    def feed_pieces(self, pieces: list[bytes], decoder: SSEDecoder, /) -> list[str]: ...


class PieceReading:
    """``feed_pieces`` for an assembler that reads records and pieces in one loop, ``_read``
    (both providers'): the pieces a run or a look-up takes are read in place while the decoder
    ``resumes()``, the rest of the read goes through ``decoder`` from the first piece that does
    not end its records. Each assembler's ``feed_pieces`` docstring gives its proof that a
    piece so read is exactly one record to the decoder."""

    __slots__ = ()

    def feed_records(self, records: list[bytes]) -> list[str]:
        raise NotImplementedError

    def _read(self, items: list[bytes], shown: list[str], ended: bool) -> int:
        """``feed_records`` of ``items`` — records, or (``ended``) pieces each ending its
        records — up to the first piece that does not; returns how many were read."""
        raise NotImplementedError

    def feed_pieces(self, pieces: list[bytes], decoder: SSEDecoder) -> list[str]:
        shown: list[str] = []
        if not decoder.resumes():
            shown += self.feed_records(decoder.records(b"".join(pieces)))
            return shown
        at = self._read(pieces, shown, True)
        if at < len(pieces):
            shown += self.feed_records(decoder.records(b"".join(pieces[at:])))
        return shown


def choose_transport(*, has_client: bool, has_static_credential: bool, base_url: str) -> Transport:
    """``lean`` unless something only the SDK handles is in force (module docstring)."""
    wanted = os.environ.get("SUBAGENTS_HTTP", "").strip().lower()
    if wanted not in ("", "lean", "sdk"):
        raise ValueError(f"SUBAGENTS_HTTP={wanted!r}: expected 'lean' or 'sdk'")
    if has_client or wanted == "sdk" or not has_static_credential:
        return "sdk"
    return "lean" if lean_transport_allowed(Origin.parse(base_url)) else "sdk"


def header_lines(headers: dict[str, str]) -> bytes:
    """Header lines sent with every request of an endpoint, encoded once."""
    return "".join(f"{name}: {value}\r\n" for name, value in headers.items()).encode("latin-1")


def read_timeout_s() -> float:
    """``API_TIMEOUT_MS`` (as Claude Code reads it), else the SDKs' 600 s: the longest silence
    tolerated inside one response."""
    raw = os.environ.get("API_TIMEOUT_MS", "").strip()
    if not raw:
        return READ_TIMEOUT_S
    try:
        value = float(raw) / 1000
    except ValueError:
        raise ValueError(f"API_TIMEOUT_MS={raw!r}: expected milliseconds") from None
    if value <= 0:
        raise ValueError(f"API_TIMEOUT_MS={raw!r}: expected a positive number of milliseconds")
    return value


@dataclass(kw_only=True)
class LeanEndpoint:
    """Where one provider's requests go: origin, path, ready header bytes, a shared pool."""

    origin: Origin
    path: str
    headers: bytes
    client: HTTPClient = field(default_factory=lambda: HTTPClient(read_timeout_s=read_timeout_s()))

    async def aclose(self) -> None:
        await self.client.aclose()


@dataclass(kw_only=True, slots=True)
class LeanCall:
    """One streamed call over the lean transport (``stream`` or ``respond``).

    ``status_message(status, raw_body, path, headers)`` gives the text and parsed body of an
    error response, and ``event_message(status, event, path, headers)`` the text of an error
    event inside a 200 stream, each worded as the provider's SDK words it, so both transports
    report the same error."""

    endpoint: LeanEndpoint
    body: dict[str, Any]
    assembler: WireAssembler
    model: str
    label: str
    status_message: Callable[[int, bytes, str, Mapping[str, str]], tuple[str, object]]
    event_message: Callable[[int, StreamErrorEvent, str, Mapping[str, str]], str]
    abort: AbortSignal | None

    async def stream(self) -> AsyncIterator[StreamEvent]:
        """Text deltas as they come, then the whole message."""
        with abort_scope(self.abort):
            response = await self._open()
            decoder, feed = SSEDecoder(), self.assembler.feed_records
            try:
                async for piece in response.body():
                    for text in feed(decoder.records(piece)):
                        yield TextDelta(text=text)
                feed(decoder.flush_records())
            except (HTTPTransportError, StreamErrorEvent) as exc:
                raise self._failure(exc, response) from _cause(exc)
            finally:
                response.close()
        yield self.assembler.done(self.model, self.label)

    async def respond(self) -> MessageDone:
        """The whole message: the same exchange with no event per text delta (what
        ``complete`` needs, and all the agent loop asks for), and no async generator."""
        with abort_scope(self.abort):
            response = await self._open()
            decoder, assembler = SSEDecoder(), self.assembler
            feed = assembler.feed_pieces
            try:
                await response.each(lambda pieces: feed(pieces, decoder))
                assembler.feed_records(decoder.flush_records())
            except (HTTPTransportError, StreamErrorEvent) as exc:
                raise self._failure(exc, response) from _cause(exc)
            finally:
                response.close()
        return self.assembler.done(self.model, self.label)

    async def _open(self) -> Response:
        """Send the request; the response once its head is in. An error status is raised as
        the provider's SDK words it."""
        endpoint, label = self.endpoint, self.label
        try:
            response = await endpoint.client.post(
                endpoint.origin, endpoint.path, endpoint.headers, orjson.dumps(self.body)
            )
        except HTTPTransportError as exc:
            raise _connection_error(label, exc) from exc
        if 200 <= response.status < 300:
            return response
        try:
            raw = await response.read()
            text, parsed = self.status_message(
                response.status, raw, endpoint.path, response.headers
            )
        except HTTPTransportError as exc:
            raise _connection_error(label, exc) from exc
        finally:
            response.close()
        raise status_error(response.status, clip(text), parsed, response.headers, label)

    def _failure(
        self, exc: HTTPTransportError | StreamErrorEvent, response: Response
    ) -> ModelError:
        if not isinstance(exc, StreamErrorEvent):
            return _connection_error(self.label, exc)
        status, headers = response.status, response.headers
        text = self.event_message(status, exc, self.endpoint.path, headers)
        if exc.with_status:
            return status_error(status, clip(text), exc.body, headers, self.label)
        return ModelError(stream_error_kind(exc.body), f"{self.label}: {clip(text)}")


def _cause(exc: HTTPTransportError | StreamErrorEvent) -> BaseException | None:
    """A dropped connection keeps its cause; an error event is reported as itself."""
    return exc if isinstance(exc, HTTPTransportError) else None


def _connection_error(label: str, exc: HTTPTransportError) -> ModelError:
    return ModelError("connection", f"{label}: connection failed: {clip(str(exc))}")


def not_json(data: bytes) -> HTTPTransportError:
    """A stream record that is not JSON: the server's fault, reported like a dropped stream."""
    return HTTPTransportError(f"the server sent an event that is not JSON: {data[:80]!r}")


def parse_error_body(raw: bytes) -> tuple[str, object]:
    """An error response's stripped text and its JSON (or the text when it is not JSON)."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        return text, orjson.loads(text)
    except orjson.JSONDecodeError:
        return text, None


class HTTPProvider:
    """What both HTTP providers share: one of two transports behind ``stream`` and ``respond``.

    A subclass sets ``name``, ``label``, ``client`` (an SDK client or None) and ``_endpoint``
    (the lean endpoint or None) in its constructor, and says how to build a request body, an
    assembler, an error text and the SDK call."""

    name: str
    label: str
    client: Any
    _endpoint: LeanEndpoint | None
    sdk_module: str
    wire_tools: WireTools | None = None
    """Where ``body`` takes its tool lists from: the lean transport sends their JSON as
    encoded once (``WireTools.fragment``)."""

    def body(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def lean_body(self, request: ModelRequest) -> dict[str, Any]:
        """``body`` for the lean transport, which may hold ``orjson.Fragment``s: parts of it
        as ready JSON bytes (``orjson.dumps`` writes them as they are)."""
        return self.body(request)

    def assembler(self) -> WireAssembler:
        raise NotImplementedError

    def status_message(
        self, status: int, raw: bytes, path: str, headers: Mapping[str, str]
    ) -> tuple[str, object]:
        raise NotImplementedError

    def event_message(
        self, status: int, event: StreamErrorEvent, path: str, headers: Mapping[str, str]
    ) -> str:
        """An error event's text inside a 200 stream; by default as the assembler worded it."""
        return str(event)

    def sdk_create(self, params: dict[str, Any]) -> Awaitable[Any]:
        raise NotImplementedError

    @property
    def transport(self) -> Transport:
        return "lean" if self._endpoint is not None else "sdk"

    async def aclose(self) -> None:
        """Close the client's connections (shared with siblings from ``with_model_id``)."""
        if self._endpoint is not None:
            await self._endpoint.aclose()
        else:
            await self.client.close()

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        lean = self._lean_call(request)
        if lean is not None:
            return lean.stream()
        params = self.body(request)
        return relay(
            lambda: self.sdk_create(params),
            self.assembler(),
            model=self.name,
            label=self.label,
            sdk=load_sdk(self.sdk_module, self.sdk_module),
            abort=request.abort,
        )

    async def respond(self, request: ModelRequest) -> MessageDone:
        """``stream`` drained (``complete`` calls it): on the lean transport, without an event
        per text delta."""
        lean = self._lean_call(request)
        if lean is not None:
            return await lean.respond()
        return await drain(self.stream(request), self.name)

    def _lean_call(self, request: ModelRequest) -> LeanCall | None:
        if self._endpoint is None:
            return None
        body = self.lean_body(request)
        tools = body.get("tools")
        if tools is not None and self.wire_tools is not None:
            body["tools"] = self.wire_tools.fragment(tools)  # encoded once per tool list
        # ``LeanCall(endpoint=..., ...)`` with every field set directly: one is made per
        # model call, and a class called with keywords packs them into a dict and unpacks it
        # for ``__init__`` (docs/performance.md, session 11).
        call: LeanCall = _new(LeanCall)
        call.endpoint = self._endpoint
        call.body = body
        call.assembler = self.assembler()
        call.model = self.name
        call.label = self.label
        call.status_message = self.status_message
        call.event_message = self.event_message
        call.abort = request.abort
        return call


_new = object.__new__


def string_run(run: list[bytes]) -> tuple[list[str], str] | None:
    """The JSON strings of a run of delta pieces parsed in one ``orjson`` call, and their text
    joined; None unless each piece is exactly one JSON string (the caller then feeds the run
    record by record, failing as it would have).

    The proof: the pieces are joined as ``[p1,<TAB>p2,<TAB>...]`` and must hold no LF and no
    CR (either ends an SSE line, and JSON takes both as whitespace: a record read from a
    chunk's raw data, ``feed_pieces``, may hold a CR the decoder would have made an LF). If that
    parses to as many strings as there are pieces, every piece is exactly one JSON string
    (whitespace around it allowed): a tab cannot stand inside a JSON string, so each inserted
    comma is outside every string, and in an array of strings only that makes it a separator —
    n - 1 of them, and n values, leave no other."""
    joined = b",\t".join(run)
    if joined.find(b"\n") >= 0 or joined.find(b"\r") >= 0:
        return None
    try:
        values = orjson.loads(b"[" + joined + b"]")
    except orjson.JSONDecodeError:
        return None
    if len(values) != len(run):
        return None
    try:
        return values, "".join(values)
    except TypeError:  # not all strings
        return None
