"""The OpenAI-compatible provider: chat completions through the official ``openai`` SDK, streamed.

It covers OpenAI itself and the local servers that speak the same protocol (Ollama, vLLM,
LM Studio, llama.cpp server). Our Anthropic-shaped history is converted (``openai_messages.py``;
each message once per agent, ``HistoryConversions``):

* the system prompt becomes the first ``system`` message;
* an assistant message's ``tool_use`` blocks become its ``tool_calls`` (arguments as JSON text);
  thinking blocks have no equivalent and are left out;
* a user message's ``tool_result`` blocks become ``role: "tool"`` messages, in order, right after
  the assistant message that called them (the protocol requires that place); its text blocks
  follow as one user message. Chat completions have no error flag for a tool result, so an
  ``is_error`` result's text is prefixed with ``Error: ``.

Streaming accumulates text and parallel tool-call deltas by their ``index``. Arguments that are
not valid JSON do not fail the call: the tool input becomes ``{"invalid_json_arguments": raw}``,
which every tool's input model rejects as an unknown field, so the loop returns an ``is_error``
result naming it and the model can try again. Usage comes from the final chunk
(``stream_options.include_usage``): cached prompt tokens are reported as cache reads and left out
of ``input_tokens``, so the four counters add up the way Anthropic's do.

Requests go over the lean transport by default (``_lean``), the official SDK being the reference
and the fallback (see ``anthropic.py``); neither retries: ``ModelCaller`` owns retries.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from subagents.messages import ContentBlock, Usage, usage_of
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
    load_sdk,
    parse_tool_arguments,
)
from subagents.models._sse import SSEEvent, parse_record, piece_records
from subagents.models.base import MessageDone, ModelError, ModelRequest, message_done
from subagents.models.openai_messages import HistoryConversions
from subagents.models.wire_tools import WireTools

KEYLESS_PLACEHOLDER = "not-needed"
"""API key sent when none is configured: local servers ignore it, the SDK insists on one."""

_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


DEFAULT_BASE_URL = "https://api.openai.com/v1"


WIRE_TOOLS = WireTools(lambda tools: to_openai_tools(tools))
"""Each agent's tool list as chat completions take it, made once per list."""


class OpenAIModel(HTTPProvider):
    """A chat-completions model. ``client`` may be any ``AsyncOpenAI``.

    ``max_tokens_param`` names the output cap: ``max_tokens`` is what every compatible server
    understands; OpenAI's reasoning models want ``max_completion_tokens``. Requests go over the
    lean transport (``_lean``) unless ``client`` is given or the SDK is needed; ``transport``
    forces one. Key: ``api_key``, else ``OPENAI_API_KEY``, else ``KEYLESS_PLACEHOLDER``; URL:
    ``base_url``, else ``OPENAI_BASE_URL``; ``OPENAI_ORG_ID`` and ``OPENAI_PROJECT_ID`` are sent
    as the SDK sends them.
    """

    provider = "openai"
    wire_tools = WIRE_TOOLS
    sdk_module = "openai"

    def __init__(
        self,
        name: str,
        *,
        client: Any = None,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens_param: str = "max_tokens",
        transport: Transport | None = None,
        _endpoint: LeanEndpoint | None = None,
    ) -> None:
        self.name = name
        self.label = f"openai model {name!r}"
        self.max_tokens_param = max_tokens_param
        self.client: Any = client
        self._endpoint = _endpoint
        self._history = HistoryConversions()
        if client is None and _endpoint is None:
            key = api_key or os.environ.get("OPENAI_API_KEY") or KEYLESS_PLACEHOLDER
            url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
            chosen = transport or choose_transport(
                has_client=False, has_static_credential=True, base_url=url
            )
            if chosen == "lean":
                self._endpoint = _lean_endpoint(url, key)
            else:
                sdk = load_sdk("openai", "openai")
                self.client = sdk.AsyncOpenAI(
                    api_key=key, base_url=url, max_retries=0, http_client=bounded_http_client(sdk)
                )

    def with_model_id(self, model_id: str) -> OpenAIModel:
        """A sibling for another model on the same server, sharing this one's client."""
        return OpenAIModel(
            model_id,
            client=self.client,
            max_tokens_param=self.max_tokens_param,
            _endpoint=self._endpoint,
        )

    def body(self, request: ModelRequest) -> dict[str, Any]:
        return self.build_params(request)

    def assembler(self) -> ChunkAssembler:
        return ChunkAssembler()

    def status_message(
        self, status: int, raw: bytes, path: str, headers: Mapping[str, str]
    ) -> tuple[str, object]:
        return status_message(status, raw)

    def sdk_create(self, params: dict[str, Any]) -> Awaitable[Any]:
        result: Awaitable[Any] = self.client.chat.completions.create(**params)
        return result

    def lean_body(self, request: ModelRequest) -> dict[str, Any]:
        """``body`` with the messages as their JSON (``HistoryConversions.encoded``)."""
        agent_id, system = request.metadata.agent_id, request.system
        encoded = self._history.encoded(agent_id, system, request.messages)
        if encoded is None:
            return self.build_params(request)
        return self.build_params(request, messages=orjson.Fragment(encoded))

    def build_params(self, request: ModelRequest, messages: Any = None) -> dict[str, Any]:
        """The request body, in the order the SDK writes it to the wire (``messages``: what
        to send as them, else the history converted)."""
        if messages is None:
            agent_id, system = request.metadata.agent_id, request.system
            messages = self._history.convert(agent_id, system, request.messages)
        params: dict[str, Any] = {
            "model": self.name,
            "stream": True,
            "messages": messages,
            self.max_tokens_param: request.max_tokens,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            params["tools"] = WIRE_TOOLS.dicts(request.tools)
        return params


def _lean_endpoint(base_url: str, key: str) -> LeanEndpoint:
    headers = {
        "Authorization": f"Bearer {key}",
        "Accept": "application/json",
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
    }
    if os.environ.get("OPENAI_ORG_ID"):
        headers["OpenAI-Organization"] = os.environ["OPENAI_ORG_ID"]
    if os.environ.get("OPENAI_PROJECT_ID"):
        headers["OpenAI-Project"] = os.environ["OPENAI_PROJECT_ID"]
    return LeanEndpoint(
        origin=Origin.parse(base_url), path="/chat/completions", headers=header_lines(headers)
    )


def status_message(status: int, raw: bytes) -> tuple[str, object]:
    """An error response's text as the SDK words it: ``Error code: N - <error.message>``."""
    text, body = parse_error_body(raw)
    if body is None:
        return f"Error code: {status}", text
    error = body.get("error", body) if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if isinstance(message, str) and message:
        return f"Error code: {status} - {message}", body
    return f"Error code: {status}", body


def to_openai_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """Function tools from ``ToolSchema``s or Anthropic-shaped tool dicts."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        spec = tool.to_dict() if hasattr(tool, "to_dict") else tool
        function = {
            "name": spec["name"],
            "description": spec.get("description", ""),
            "parameters": spec.get("input_schema") or {"type": "object", "properties": {}},
        }
        out.append({"type": "function", "function": function})
    return out


_NO_RUN = b"\n"
"""A prefix no record of the inline shape starts with (a data line holds no LF)."""
_NO_OPENING = b"\n\n"
"""An opening no record starts with (records are split at blank lines)."""


@dataclass(kw_only=True)
class _ToolCallSlot:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ChunkAssembler(PieceReading):
    """Builds the assistant message from ``chat.completion.chunk``s, each the chunk's JSON.

    Every chunk of a stream opens with the same bytes — ``{"id":…,"object":…,"created":…,
    "model":…,"system_fingerprint":…,`` — ahead of ``"choices"``, about 60 % of a content
    chunk, none of it read here. ``skip`` holds that opening once proven (``_skippable``), and
    a chunk starting with exactly those bytes and then a key is parsed from ``{`` + the rest:
    the same members this reads, valid exactly when the whole chunk is (below). Anything else
    is parsed whole.

    A plain class: one is made per model call (see ``anthropic.StreamAssembler``)."""

    __slots__ = (
        "calls",
        "finish_reason",
        "opening",
        "run_call",
        "run_prefix",
        "run_suffix",
        "skip",
        "text",
        "usage",
    )

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, _ToolCallSlot] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        """From the last chunk that carried usage (None: none did, zeros then)."""
        self.skip: bytes | None = None
        """The proven opening (b"" when the first chunk's could not be proven); None before."""
        self.opening = _NO_OPENING
        """``data: `` + ``skip`` once proven (and free of LF: one line): a record opening so
        whose rest is a known finish-only chunk's (``_FINISHES``) is read by a look-up."""
        self.run_prefix = _NO_RUN
        """The bytes a chunk record like the last one learnt from opens with, up to the string
        it adds (``_learn``); ``feed_records`` reads runs of such records without parsing each."""
        self.run_suffix = b""
        """What follows that string in such a record."""
        self.run_call: int | None = None
        """The tool call whose arguments the run's strings are; None: they are text."""

    def feed_records(self, records: list[bytes]) -> list[str]:
        """SSE records (``SSEDecoder.records``); returns the texts to show live.

        A run of chunks that differ from the one a template was learnt from only in the text
        or tool arguments they add (``_learn``) is read straight from the records' bytes and
        applied at once (``_apply_run``); every other record is parsed (``_feed_data``).
        ``tests/wire/test_lean_records.py`` checks both readings give what the second gives
        alone, on streams split, cut and corrupted."""
        shown: list[str] = []
        self._read(records, shown, False)
        return shown

    # ``feed_pieces`` (``_lean.PieceReading``): the data of a network read's HTTP chunks, read
    # as ``feed_records`` reads ``decoder.records(b"".join(pieces))``, without that join and
    # split while each chunk ends its records (see the same note in
    # ``anthropic.StreamAssembler``). A piece a run takes is ``run_prefix + S + run_suffix +
    # "\n\n"`` with S holding no LF or CR, a looked- up finish ``opening + rest + "\n\n"``, an
    # inline one ``data: `` + one line + ``"\n\n"`` with no CR: the prefix, suffix, opening and
    # rest hold no LF (``_use``, ``_template``, ``_learn_finish``) and no CR (learnt from data
    # the decoder made LF, or from such pieces), and none ends with an LF, so each is one record
    # to the decoder, which resumes after it.

    def _read(self, items: list[bytes], shown: list[str], ended: bool) -> int:
        """``feed_records`` of ``items`` — records, or (``ended``) pieces each ending its
        records (``feed_pieces``) — up to the first piece that does not; returns how many
        items were read."""
        blank = b"\n\n" if ended else b""
        drop = len(blank)
        # With no template (``run_suffix`` b"", ``run_prefix`` ``_NO_RUN``) the end is b"",
        # which only an empty item ends with (``item[0:]`` is all of it), and none of those
        # starts with ``_NO_RUN``: nothing is read as a run. (``_NO_RUN`` + a blank line took
        # a piece that opens with an LF and ends with a blank line for a run's: a JSON string
        # between became text, and ``"\n\n"``, prefix and end overlapping, was rebuilt as
        # another piece.) Likewise no opening proven (``_NO_OPENING``, which starts no record
        # but may start a piece) compares 0 bytes, never equal: ``"\n\n"`` + a finish
        # chunk's rest + ``"\n\n"`` is no data, and it set the finish reason. (Inline, not
        # a function each: a call costs ~400 instructions, and these run per refresh.)
        prefix = self.run_prefix
        suffix = self.run_suffix + blank if self.run_suffix else b""
        size, tail = len(prefix), -len(suffix)
        opening = self.opening
        cut = len(opening) if opening is not _NO_OPENING else 0
        run: list[bytes] = []
        for at, item in enumerate(items):
            if item[:size] == prefix and item[tail:] == suffix:
                run.append(item[size:tail])
                continue
            if run:
                self._apply_run(run, shown, ended)
                run = []
                # A run read record by record may have learnt a template (``_learn``): a
                # later record is matched against the template as it is now.
                prefix = self.run_prefix
                suffix = self.run_suffix + blank if self.run_suffix else b""
                size, tail = len(prefix), -len(suffix)
            if item[:cut] == opening:
                finish = _FINISHES.get(item[cut : len(item) - drop])
                if finish is not None and item[len(item) - drop :] == blank:
                    self.finish_reason = finish  # what its parse would do (``_learn_finish``)
                    continue
            if not ended:
                if item[:6] == b"data: " and item.find(b"\n") < 0:  # the usual shape, inline
                    self._feed_data(item[6:], shown)
                else:
                    event = parse_record(item)
                    if event is not None:
                        self._feed_data(event[1], shown)
            elif (
                item[:6] == b"data: "
                and item.find(b"\n") == len(item) - 2
                and item[-1:] == b"\n"
                and item.find(b"\r") < 0
            ):  # one line and its blank line: the usual shape, inline
                self._feed_data(item[6:-2], shown)
            else:
                records = piece_records(item)
                if records is None:
                    return at  # (no run is pending: a run ends before any other record)
                # Its records as the decoder's would be read (runs and look-ups too: a body
                # not chunked is one piece per read, of many records)
                self._read(records, shown, False)
            if self.run_prefix is not prefix:  # (``_use`` sets both)
                prefix = self.run_prefix
                suffix = self.run_suffix + blank if self.run_suffix else b""
                size, tail = len(prefix), -len(suffix)
            if self.opening is not opening:
                opening = self.opening
                cut = len(opening) if opening is not _NO_OPENING else 0
        if run:
            self._apply_run(run, shown, ended)
        return len(items)

    def feed_events(self, events: list[SSEEvent]) -> list[str]:
        """SSE records, parsed; returns the texts to show live."""
        shown: list[str] = []
        for _name, data in events:
            self._feed_data(data, shown)
        return shown

    def _feed_data(self, data: bytes, shown: list[str]) -> None:
        """One record's data as the SDK reads it: ``[DONE]`` ends the stream, and a chunk
        carrying an ``error`` fails the call with it. A chunk read from after its opening that
        adds only text or only arguments to one call is learnt from (``_learn``)."""
        if data[:6] == b"[DONE]":
            return
        skip = self.skip
        size = len(skip) if skip else 0
        rest = None
        try:
            if size and data[:size] == skip and data[size : size + 1] == b'"':
                rest = data[size:]
                try:
                    chunk = orjson.loads(b"{" + rest)
                except orjson.JSONDecodeError:
                    chunk = orjson.loads(data)  # raises as the whole chunk would
            else:
                if skip is None:  # the first chunk: is its opening provably skippable?
                    skip = self._prove_opening(data)
                    if skip and data[len(skip) :] in _IDLE:
                        return  # what its parse would do: nothing (``_learn_idle``)
                    if skip:
                        rest = data[len(skip) :]
                chunk = orjson.loads(data)
                if rest is not None:
                    _learn_idle(rest, chunk)
                    rest = None  # parsed whole: nothing else is learnt from it
        except orjson.JSONDecodeError:
            raise not_json(data) from None
        if type(chunk) is dict and chunk.get("error"):
            raise _chunk_error(chunk["error"])
        calls = len(self.calls)
        text = self.feed(chunk)
        if text:
            shown.append(text)
        if rest is not None:
            if chunk.get("usage"):
                # No finish to look up and no template (``_learn_finish`` and ``_template``
                # each refuse a chunk with usage): only a call it started is learnt for.
                if len(self.calls) != calls:
                    self._learn(rest, chunk, started=True)
            elif not _learn_finish(rest, chunk):
                self._learn(rest, chunk, started=len(self.calls) != calls)

    def _prove_opening(self, data: bytes) -> bytes:
        """The first chunk's opening, proven skippable (``_skippable``) or b"", now ``skip``;
        the record opening when it is one line, and the text's last template for runs."""
        skip = self.skip = _skippable(data)
        if skip and skip.find(b"\n") < 0:
            # One line: a record that opens with ``data: `` + it is that line's data (an LF
            # would end the line there, and the rest is no data).
            self.opening = b"data: " + skip
            self._use(None, _RECENT.get(None))  # the text's last template
        return skip

    def _learn(self, rest: bytes, chunk: dict[str, Any], *, started: bool) -> None:
        """When ``chunk`` ``started`` a tool call, the template the last stream used for that
        call's arguments, if any; else make ``chunk`` (``skip + rest``) the run template if it
        only adds a string: text, or one call's arguments (``_template``). (A call's first
        chunk carries its id and name, which no template may: it is not tried as one. Learning
        less only means parsing more.)"""
        if started:
            last = next(reversed(self.calls))
            self._use(last, _RECENT.get(last))
            return
        found = _template(rest, chunk)
        if found is not None:
            head, suffix, call = found
            if len(_RECENT) >= 64:
                _RECENT.clear()
            _RECENT[call] = head, suffix
            self._use(call, (head, suffix))

    def _use(self, call: int | None, template: tuple[bytes, bytes] | None) -> None:
        """Read runs by ``template`` (``(head, suffix)``, proven) after the proven opening."""
        if template is not None and self.opening is not _NO_OPENING:
            head, suffix = template
            self.run_prefix, self.run_suffix = self.opening + head, suffix
            self.run_call = call

    def _apply_run(self, run: list[bytes], shown: list[str], ended: bool) -> None:
        """Apply chunks whose records were ``run_prefix + piece + run_suffix`` each, as
        ``_feed_data`` would one by one: the pieces parsed in one call, proven to be one JSON
        string each (``_lean.string_run``), and the template
        proven to read any string there as it reads the one it was learnt with (``_template``),
        with no other effect than adding it."""
        parsed = string_run(run)
        if parsed is not None:
            values, text = parsed
            call = self.run_call
            if call is None:
                self.text.append(text)
                shown += filter(None, values)
                return
            slot = self.calls.get(call)
            if slot is None:
                slot = self.calls[call] = _ToolCallSlot()
            slot.arguments.append(text)
            return
        prefix, suffix = self.run_prefix, self.run_suffix
        for piece in run:
            if ended:  # the piece as it came; what it holds, record by record
                found = piece_records(prefix + piece + suffix + b"\n\n")
                assert found is not None  # it ends with the suffix, no LF: it ends its records
                records = found
            else:
                records = [prefix + piece + suffix]  # the record as it came
            for record in records:
                event = parse_record(record)
                if event is not None:
                    self._feed_data(event[1], shown)

    def feed(self, chunk: dict[str, Any]) -> str | None:
        """Apply one chunk; returns text to show live, if it carried some.

        Runs once per streamed chunk, so it reads each field once and builds nothing for the
        usual chunk (one choice, a delta with one piece of text or of tool arguments)."""
        usage = chunk.get("usage")
        if usage:
            self.usage = map_usage(usage)
        choices = chunk.get("choices")
        if not choices:
            return None
        shown: str | None = None
        for choice in choices:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if delta:
                content = delta.get("content")
                if content:
                    self.text.append(content)
                    shown = content if shown is None else shown + content
                calls = delta.get("tool_calls")
                if calls:
                    for call in calls:
                        self._apply_tool_delta(call)
            finish = choice.get("finish_reason")
            if finish:
                self.finish_reason = finish
        return shown

    def _apply_tool_delta(self, call: dict[str, Any]) -> None:
        index = call.get("index")
        if index is None:
            index = 0
        slot = self.calls.get(index)
        if slot is None:
            slot = self.calls[index] = _ToolCallSlot()
        if call.get("id") and not slot.id:
            slot.id = call["id"]
        function = call.get("function")
        if function:
            slot.name += function.get("name") or ""
            slot.arguments.append(function.get("arguments") or "")

    def done(self, model: str, label: str) -> MessageDone:
        if self.finish_reason is None:
            raise ModelError("connection", f"{label}: stream ended before a finish_reason")
        content: list[ContentBlock] = []
        text = "".join(self.text)
        if text:
            content.append({"type": "text", "text": text})
        for index in sorted(self.calls):
            slot = self.calls[index]
            content.append(
                {
                    "type": "tool_use",
                    # Some local servers send no id; the loop needs one to pair the result.
                    "id": slot.id or f"call_{uuid.uuid4().hex[:24]}",
                    "name": slot.name,
                    "input": parse_tool_arguments("".join(slot.arguments)),
                }
            )
        if not content:
            content.append({"type": "text", "text": ""})
        stop = _STOP_REASONS.get(self.finish_reason, self.finish_reason)
        if self.calls:
            stop = "tool_use"
        usage = self.usage if self.usage is not None else Usage()
        return message_done({"role": "assistant", "content": content}, usage, stop, model)


_READ = frozenset(("choices", "usage", "error"))
"""The members of a chunk this assembler reads."""


def _skippable(chunk: bytes) -> bytes:
    """The opening of ``chunk`` (a JSON object) before its ``"choices"`` key, when it is
    proven to be ``{`` and whole members, then a comma, with no member this reads; else b"".

    Why the rest then reads the same: with ``opening[:-1] + b"}"`` a JSON object of at least
    one member, the parser is, right after ``opening``, inside the outer object expecting a
    key — exactly where it is after a lone ``{`` when the next byte is a key's quote (which
    ``feed_events`` checks; it rules out the ``}`` a trailing comma would make invalid). So a
    chunk ``opening + rest`` is valid JSON exactly when ``{ + rest`` is, and its other members
    are the same; UTF-8 too, the opening being valid text ending in ASCII. What is skipped
    holds none of ``_READ``: a repeated key decides nothing this reads."""
    cut = chunk.find(b'"choices":')
    if cut < 2 or chunk[cut - 1 : cut] != b",":
        return b""
    try:
        opening = orjson.loads(chunk[: cut - 1] + b"}")
    except orjson.JSONDecodeError:
        return b""
    if type(opening) is not dict or not opening or not _READ.isdisjoint(opening):
        return b""
    return chunk[:cut]


def _template(rest: bytes, chunk: dict[str, Any]) -> tuple[bytes, bytes, int | None] | None:
    """``(head, suffix, call)`` when ``chunk`` (parsed from ``{ + rest``) adds only a string —
    text (``call`` None) or call ``call``'s arguments — and ``rest`` is ``head + that string's
    JSON + suffix``, proven to read any string there the same way (``_proven``).

    Only a ``rest`` without LF gives one: a run's record is read as ``data: `` + opening +
    head + string + suffix on one line, so head and suffix must be on one line too. A chunk
    whose data came over two ``data:`` lines holds an LF, and a later record written as its
    bytes is two lines, the second no data line
    (``test_an_openai_template_learnt_from_two_lines_is_not_read_from_one``)."""
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1 or chunk.get("usage"):
        return None
    choice = choices[0]
    if type(choice) is not dict or choice.get("index", 0) != 0 or choice.get("finish_reason"):
        return None
    if rest.find(b"\n") >= 0:
        return None
    delta = choice.get("delta")
    if type(delta) is not dict:
        return None
    content, calls = delta.get("content"), delta.get("tool_calls")
    if type(content) is str and not calls:
        key, value, call = b'"content":', content, None
    elif not content and type(calls) is list and len(calls) == 1 and type(calls[0]) is dict:
        tool = calls[0]
        function, index = tool.get("function"), tool.get("index")
        if index is None:
            index = 0
        if type(index) is not int or tool.get("id") or type(function) is not dict:
            return None
        arguments = function.get("arguments")
        if type(arguments) is not str or function.get("name"):
            return None
        key, value, call = b'"arguments":', arguments, index
    else:
        return None
    encoded = orjson.dumps(value)
    at = rest.find(key + encoded)
    if at < 0:
        return None
    cut = at + len(key)
    head, suffix = rest[:cut], rest[cut + len(encoded) :]
    if not suffix or not _proven(head, suffix, chunk, value):
        return None
    return head, suffix, call


def _proven(head: bytes, suffix: bytes, chunk: dict[str, Any], value: str) -> bool:
    """Whether ``{ + head + S + suffix`` reads, for every JSON string S, as ``chunk`` with
    ``value`` (the string it was read with) replaced by S's — checked once per template with
    a probe string, and remembered.

    Why one probe proves it for every string: JSON is parsed token by token, a string token
    is one token whatever it holds, and whether it is a key or a value depends only on what
    precedes it. If the probe parses and the result differs from ``chunk`` exactly where
    ``value`` was, replaced by the probe, that token is the value there (the probe is not
    ``value``, so nothing else can have supplied it); any other string in its place is read
    there too, and everything else the same."""
    if (head, suffix) in _PROVEN:
        return True
    probe = '\u00e9 probe \\ "'
    if value == probe:
        return False
    try:
        read = orjson.loads(b"{" + head + orjson.dumps(probe) + suffix)
        expected = orjson.loads(b"{" + head + orjson.dumps(value) + suffix)
    except orjson.JSONDecodeError:
        return False
    if expected != chunk or not _replace(expected, value, probe) or read != expected:
        return False
    if len(_PROVEN) >= 64:
        _PROVEN.clear()
    _PROVEN.add((head, suffix))
    return True


def _learn_finish(rest: bytes, chunk: dict[str, Any]) -> bool:
    """Remember ``rest`` (a chunk's bytes after the proven opening, ``chunk`` their parse)
    when all ``feed`` does with it is set the finish reason, and nothing else reads it: no
    usage, no error, one choice with index 0 and no delta, and no template to learn (a
    finish reason rules one out). Servers end every stream with such a chunk, byte for byte
    the same after the opening (``"choices":[{"index":0,"delta":{},"logprobs":null,
    "finish_reason":"stop"}],"usage":null}``), so the next stream's is looked up whole
    (``feed_records``): the same bytes parse the same. Only a rest without LF is kept, so
    the record ``data: `` + opening + rest is one line and that its data."""
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1 or chunk.get("usage"):
        return False
    choice = choices[0]
    if type(choice) is not dict or choice.get("index", 0) != 0 or choice.get("delta"):
        return False
    finish = choice.get("finish_reason")
    if not finish or chunk.get("error") or rest.find(b"\n") >= 0:
        return False
    if len(_FINISHES) >= 64:
        _FINISHES.clear()
    _FINISHES[rest] = finish
    return True


def _learn_idle(rest: bytes, chunk: Any) -> None:
    """Remember ``rest`` (a first chunk's bytes after its proven opening, ``chunk`` the whole
    chunk's parse) when ``feed`` does nothing with it and it carries no error: no usage, one
    choice with index 0, no finish reason, a delta adding no text and no call. Servers open
    every stream with such a chunk (``"choices":[{"index":0,"delta":{"role":"assistant",
    "content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`` after
    an opening that differs per stream: its id), so the next stream's is looked up by those
    bytes once its own opening is proven, and not parsed: with the opening proven, the chunk
    is valid exactly when ``{`` + its rest is and reads what that reads (``_skippable``), and
    these bytes did parse, and did nothing. (The look-up is of the data, not of the record's
    bytes, so an LF in it changes nothing.)"""
    if type(chunk) is not dict or chunk.get("usage") or chunk.get("error"):
        return
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1:
        return
    choice = choices[0]
    if type(choice) is not dict or choice.get("index", 0) != 0 or choice.get("finish_reason"):
        return
    delta = choice.get("delta")
    if type(delta) is not dict or delta.get("content") or delta.get("tool_calls"):
        return
    if len(_IDLE) >= 64:
        _IDLE.clear()
    _IDLE.add(rest)


_IDLE: set[bytes] = set()
"""First chunks' bytes after the opening that do nothing (``_learn_idle``)."""
_FINISHES: dict[bytes, Any] = {}
"""Finish-only chunks' bytes after the opening, and their finish reason (``_learn_finish``)."""
_PROVEN: set[tuple[bytes, bytes]] = set()
"""Templates already proven (by ``(head, suffix)``: a property of the bytes alone)."""
_RECENT: dict[int | None, tuple[bytes, bytes]] = {}
"""The template last learnt for text (None) and for each call's arguments: a server writes
every stream's chunks alike, so the next stream's runs are read from its first such chunk."""


def _replace(chunk: dict[str, Any], value: str, probe: str) -> bool:
    """Put ``probe`` where ``_template`` found ``value`` in ``chunk`` (in place)."""
    delta = chunk["choices"][0]["delta"]
    if delta.get("content") == value and not delta.get("tool_calls"):
        delta["content"] = probe
        return True
    function = delta["tool_calls"][0]["function"]
    if function.get("arguments") != value:
        return False
    function["arguments"] = probe
    return True


def map_usage(usage: dict[str, Any]) -> Usage:
    """Chat-completions usage as our four counters; cached prompt tokens count once, as reads."""
    # Each counter as ``int(value or 0)`` reads it, a plain int taken as it is, inline: a
    # helper call per counter was a third of this function, which runs once per OpenAI call.
    prompt = usage.get("prompt_tokens")
    if type(prompt) is not int:
        prompt = int(prompt or 0)
    details = usage.get("prompt_tokens_details")
    if details:
        cached = details.get("cached_tokens")
        if type(cached) is not int:
            cached = int(cached or 0)
        written = details.get("cache_write_tokens")
        if type(written) is not int:
            written = int(written or 0)
    else:  # ``{}``'s counters
        cached = written = 0
    completion = usage.get("completion_tokens")  # (read last: a bad counter fails as before)
    if type(completion) is not int:
        completion = int(completion or 0)
    uncached = prompt - cached - written
    return usage_of(uncached if uncached > 0 else 0, completion, written, cached)


def _chunk_error(error: object) -> StreamErrorEvent:
    """A chunk carrying ``error``: the SDK raises ``APIError(error.message)``, no status."""
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str) or not message:
        message = "An error occurred during streaming"
    return StreamErrorEvent(message, error, with_status=False)
