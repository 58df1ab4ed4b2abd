"""The scripted model: replays turns from a script, or asks a Python function for each turn.

It is public API (``subagents.testing``) and the model behind our end-to-end tests and the
benchmark, so two things matter here: the behaviour of SPEC §19, which tests rely on to the
letter, and speed, because every benchmark model call goes through ``stream``.

Binding. An agent (``request.metadata.agent_id``) binds at its first request to the first script
entry whose ``agent_type`` equals the agent's type (absent = any) and whose ``match`` regex is
*found* in the agent's prompt (absent = any). From then on a per-agent counter serves that entry's
turns in order. No matching entry, or one request too many, is a ``ModelError("invalid_request")``
naming the agent, its type and its prompt.

A summary request (metadata ``agent_type`` "compact", ``compaction`` = N, the compacted agent's
id and prompt) binds on its own, per compaction: to the first ``"agent_type": "compact"`` entry
whose ``match`` is found in that prompt, its turns served to that compaction's requests (its
retries); the agent's own entry and counter are untouched.

Serving a turn. A turn is consumed when its request arrives, before its ``delay_ms``: a call
cancelled during the delay (a stopped task) does not replay the turn when the agent resumes. A turn
with ``error: {type, times}`` first fails that many calls, then serves its content. ``capture``
regexes are searched in the last user message before the turn's templates are rendered, so the
turn that captures can already use the value.

Speed. Regexes and templates are compiled when the script loads; a turn without placeholders is
served by building a few small dicts. Requests are turned into dicts (``.requests``, the
``record`` file) only when recording is on. Usage estimates count the characters of each message
once per agent, not once per call.

Cache accounting. A turn without ``usage`` reports what a provider's prompt cache would: the
rules and their bookkeeping are ``models/scripted_cache.py``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from subagents.messages import ContentBlock, Message, Usage, assistant_text, usage_of
from subagents.models.base import (
    MessageDone,
    ModelError,
    ModelRequest,
    RequestMetadata,
    StreamEvent,
    TextDelta,
    message_done,
)
from subagents.models.script_binding import EntryIndex
from subagents.models.script_compile import (
    Entry,
    Turn,
    capture,
    compile_entry,
    compile_turn,
    injected_error,
)
from subagents.models.script_schema import (
    ScriptError,
    ScriptFile,
    ScriptTurn,
    load_script_file,
    parse_script,
    parse_turn,
)
from subagents.models.script_templates import RenderContext, Template
from subagents.models.scripted_cache import AgentPrefix, PrefixCache, json_chars

__all__ = [
    "CACHE_WRITE_MIN_TOKENS",
    "ScriptError",
    "ScriptTurn",
    "ScriptedModel",
    "TurnFunction",
    "TurnResult",
]

TurnResult: TypeAlias = ScriptTurn | dict[str, Any] | str
TurnFunction: TypeAlias = Callable[[ModelRequest], TurnResult | Awaitable[TurnResult]]

_PROMPT_SHOWN = 200

"""Builds a slotted dataclass whose fields are then set one by one (no ``__post_init__``)."""

CACHE_WRITE_MIN_TOKENS = 1024
"""An uncached part this long is reported as cache creation; shorter, as plain input."""


# --- per-agent state -------------------------------------------------------------------------


@dataclass(kw_only=True, slots=True)
class _AgentState:
    """One agent's progress through its entry, its captures, and its usage-estimate counters."""

    agent_id: str
    agent_type: str
    prompt: str
    entry: Entry | None
    match_groups: tuple[str | None, ...] = ()
    served: int = 0
    failures: int = 0
    pending: Turn | None = None
    captures: dict[str, str] = field(default_factory=dict)
    prefix: AgentPrefix = field(default_factory=AgentPrefix)
    """Its place in the prompt-cache estimate's tree of served prefixes."""

    def describe(self) -> str:
        prompt = self.prompt
        if len(prompt) > _PROMPT_SHOWN:
            prompt = prompt[:_PROMPT_SHOWN] + "..."
        return f"agent {self.agent_id!r} (type {self.agent_type!r}, prompt {prompt!r})"


# --- the model -------------------------------------------------------------------------------


class ScriptedModel:
    """A ``Model`` that serves scripted turns (SPEC §19) or a function's answer per call.

    Build one with ``from_file``, ``from_dict`` or ``from_function``. With recording on (a
    ``record`` path, or ``keep_requests=True``), every request received is kept in
    ``requests`` and/or appended to the record file as one JSON line, failed ones with ``error``.
    """

    def __init__(
        self,
        *,
        entries: tuple[Entry, ...] = (),
        function: TurnFunction | None = None,
        record: Path | None = None,
        keep_requests: bool = True,
        name: str = "scripted",
    ) -> None:
        self.name = name
        self.provider = "scripted"
        self.record_path = record
        self.requests: list[dict[str, Any]] = []
        self._entries = entries
        self._index = EntryIndex(entries)
        self._function = function
        self._keep = keep_requests
        self._recording = keep_requests or record is not None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._agents: dict[str, _AgentState] = {}
        self._cache = PrefixCache()

    # construction

    @classmethod
    def from_file(
        cls, path: str | Path, *, keep_requests: bool = True, name: str = "scripted"
    ) -> ScriptedModel:
        """Load a JSON script (YAML for .yaml/.yml); ``record`` is relative to its folder."""
        path = Path(path)
        script = load_script_file(path)
        try:
            return cls._from_script(script, path.parent, keep_requests=keep_requests, name=name)
        except RecursionError:  # templates are compiled recursively: a clear error, not a trace
            raise ScriptError(
                f"{path}: a turn nests too deeply to compile (keep inputs and texts under a few "
                "hundred levels)"
            ) from None

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        base_dir: str | Path | None = None,
        keep_requests: bool = True,
        name: str = "scripted",
    ) -> ScriptedModel:
        """A script given as a dict; ``record`` is relative to ``base_dir`` (default: cwd)."""
        script = parse_script(dict(data) if isinstance(data, Mapping) else data, "<script>")
        folder = Path(base_dir) if base_dir is not None else Path.cwd()
        return cls._from_script(script, folder, keep_requests=keep_requests, name=name)

    @classmethod
    def from_function(
        cls,
        function: TurnFunction,
        *,
        record: str | Path | None = None,
        keep_requests: bool = True,
        name: str = "scripted",
    ) -> ScriptedModel:
        """Ask ``function(request)`` (sync or async) for each turn: a ScriptTurn, dict or text."""
        path = None if record is None else Path(record)
        return cls(function=function, record=path, keep_requests=keep_requests, name=name)

    @classmethod
    def _from_script(
        cls, script: ScriptFile, folder: Path, *, keep_requests: bool, name: str
    ) -> ScriptedModel:
        entries = tuple(compile_entry(i, agent) for i, agent in enumerate(script.agents))
        record = None if script.record is None else folder / script.record
        return cls(entries=entries, record=record, keep_requests=keep_requests, name=name)

    # the Model protocol

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Serve one turn: its text in ``TextDelta`` pieces when the turn has ``stream_ms``,
        then the whole answer as one ``MessageDone``."""
        state, turn = self._take(request)
        if turn is None:
            turn = await self._ask(request, state)
        if turn.delay_s:
            await self._sleep(turn.delay_s)
        done = self._serve(state, turn, request)
        if turn.stream_s > 0:
            pieces = _text_pieces(done.message)
            for piece in pieces:
                await self._sleep(turn.stream_s / len(pieces))
                yield TextDelta(text=piece)
        yield done

    async def respond(self, request: ModelRequest) -> MessageDone:
        """The ``MessageDone`` that ``stream`` yields, without the async generator around it
        (``models.base.complete`` calls this directly)."""
        state, turn = self._take(request)
        if turn is None:
            turn = await self._ask(request, state)
        if turn.delay_s:
            await self._sleep(turn.delay_s)
        return self._serve(state, turn, request)

    def _take(self, request: ModelRequest) -> tuple[_AgentState, Turn | None]:
        """Bind the agent, consume its next scripted turn and record the request; the caller
        waits the turn's ``delay_ms``. None: the turn is the function's to give (``_ask``).
        Not a coroutine: a scripted turn is at hand, and this runs for every call."""
        try:
            meta = request.metadata
            key = meta.agent_id if not meta.compaction else _compaction_key(meta)
            state = self._agents.get(key) or self._bind(meta, key)
            entry = state.entry
            if entry is not None:
                turns, served = entry.turns, state.served
                if served < len(turns) and turns[served].error is None:
                    # ``_next_turn`` and ``_consume`` of a turn that does not fail, inlined
                    turn = turns[served]
                    state.served = served + 1
                    state.failures = 0
                    state.pending = None
                else:
                    turn = self._next_turn(state, entry)
            elif state.pending is not None:
                turn = self._consume(state, state.pending)
            else:
                return state, None
        except ModelError as error:
            if self._recording:
                self._record(request, error.kind)
            raise
        if self._recording:
            self._record(request, None)
        return state, turn

    async def _ask(self, request: ModelRequest, state: _AgentState) -> Turn:
        """The function's turn for ``state``, taken as a pending one (consumed and recorded
        by ``_take``)."""
        try:
            state.pending = await self._ask_function(request)
        except ModelError as error:
            if self._recording:
                self._record(request, error.kind)
            raise
        _, turn = self._take(request)
        assert turn is not None
        return turn

    async def _sleep(self, seconds: float) -> None:
        """``asyncio.sleep`` on the loop this model serves, remembered: on Python 3.11 every
        running-loop lookup (inside ``asyncio.sleep`` too) is a ``getpid`` system call."""
        loop = self._loop
        if loop is None or loop.is_closed():
            loop = self._loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(seconds, _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()

    # binding and turn selection

    def _bind(self, meta: RequestMetadata, key: str) -> _AgentState:
        found = self._index.find(meta.agent_type, meta.prompt)
        if found is not None:
            return self._new_state(meta, key, *found)
        if self._function is not None:
            return self._new_state(meta, key, None, ())
        state = _AgentState(
            agent_id=meta.agent_id, agent_type=meta.agent_type, prompt=meta.prompt, entry=None
        )
        listed = ", ".join(e.describe() for e in self._entries) or "none"
        raise ModelError(
            "invalid_request",
            f"scripted model: no script entry matches {state.describe()}; entries: {listed}",
        )

    def _new_state(
        self,
        meta: RequestMetadata,
        key: str,
        entry: Entry | None,
        groups: tuple[str | None, ...],
    ) -> _AgentState:
        state = _AgentState(
            agent_id=meta.agent_id,
            agent_type=meta.agent_type,
            prompt=meta.prompt,
            entry=entry,
            match_groups=groups,
        )
        self._agents[key] = state
        return state

    def _next_turn(self, state: _AgentState, entry: Entry) -> Turn:
        """The entry's next turn for ``state`` (not a coroutine: a scripted turn is at hand)."""
        turns = entry.turns
        if state.served >= len(turns):
            raise ModelError(
                "invalid_request",
                f"scripted model: {state.describe()} made request {state.served + 1} but its "
                f"script entry {entry.describe()} has only {len(turns)} turn(s)",
            )
        return self._consume(state, turns[state.served])

    @staticmethod
    def _consume(state: _AgentState, turn: Turn) -> Turn:
        """Serve ``turn``, or fail it first as its ``error`` asks (then it is pending)."""
        error = turn.error
        if error is not None and state.failures < error.times:
            state.failures += 1
            state.pending = turn
            raise injected_error(error, state.failures, state.agent_id)
        state.served += 1
        state.failures = 0
        state.pending = None
        return turn

    async def _ask_function(self, request: ModelRequest) -> Turn:
        assert self._function is not None
        result = self._function(request)
        if inspect.isawaitable(result):
            result = await result
        return compile_turn(parse_turn(result, "scripted function result"))

    # building the answer

    def _serve(self, state: _AgentState, turn: Turn, request: ModelRequest) -> MessageDone:
        """The answer to ``request``: the turn's text and tool calls, and its usage (the
        turn's own, or the prompt-cache estimate). One method for the whole answer (its tool
        uses and usage were two more calls): this runs for every call."""
        ctx: RenderContext | None = None
        if turn.captures or turn.needs_context:
            ctx = RenderContext(
                agent_id=state.agent_id,
                prompt=state.prompt,
                messages=request.messages,
                match_groups=state.match_groups,
                captures=state.captures,
            )
            if turn.captures:
                capture(turn, ctx, state.captures)
        content: list[ContentBlock] = []
        chars = 0
        text = turn.text
        if text is not None:
            if isinstance(text, Template):
                assert ctx is not None
                text = text.render(ctx)
            content.append({"type": "text", "text": text})
            chars += len(text)
        calls = turn.calls
        if calls:
            prefix = f"toolu_{state.agent_id}_{state.served - 1}_"
            for index, call in enumerate(calls):
                if call.render is None:
                    tool_input = dict(call.input)
                    chars += call.chars
                else:
                    assert ctx is not None
                    tool_input = call.render(ctx)
                    chars += len(call.name) + json_chars(tool_input)
                content.append(
                    {
                        "type": "tool_use",
                        "id": f"{prefix}{index}",
                        "name": call.name,
                        "input": tool_input,
                    }
                )
        elif not content:
            content.append({"type": "text", "text": ""})
        message: Message = {"role": "assistant", "content": content}
        if turn.usage is not None:
            usage = Usage(**turn.usage)
        else:
            # The estimate counts the request first (with the last answer, whose characters
            # were counted as it was built), then keeps this answer for the next request.
            agent_prefix = state.prefix
            usage = _estimate(agent_prefix.input_chars(request, self._cache), chars)
            agent_prefix.answer, agent_prefix.answer_chars = message, chars
        return message_done(message, usage, "tool_use" if calls else "end_turn", self.name)

    # recording

    def _record(self, request: ModelRequest, error: str | None) -> None:
        meta = request.metadata
        entry: dict[str, Any] = {
            "agent_id": meta.agent_id,
            "agent_type": meta.agent_type,
            "prompt": meta.prompt,
            "model": request.model,
            "system": request.system,
            "tools": [tool.to_dict() for tool in request.tools],
            "messages": request.messages,
            "thinking": request.thinking,
        }
        if meta.compaction:
            entry["compaction"] = meta.compaction
        if meta.team_name is not None:
            entry["team_name"] = meta.team_name
            entry["name"] = meta.name
        if error is not None:
            entry["error"] = error
        if self.record_path is not None:
            self._append_line(json.dumps(entry, ensure_ascii=False, default=str))
        if self._keep:
            # The history is live and keeps growing: keep the list as it was at this call.
            entry["messages"] = list(request.messages)
            self.requests.append(entry)

    def _append_line(self, line: str) -> None:
        """One line per request, flushed (closed) at once so a crash loses nothing."""
        path = self.record_path
        assert path is not None
        path.parent.mkdir(parents=True, exist_ok=True)
        # backslashreplace: a lone surrogate becomes the JSON escape for the same character.
        # One write under flock: teammate processes append to the same file (docs/teams.md),
        # and their lines must never interleave.
        from subagents.store.atomic import append_locked  # only when recording: start-up stays lean

        append_locked(path, (line + "\n").encode("utf-8", errors="backslashreplace"), 0o644)

    # checks for tests

    def assert_complete(self) -> None:
        """Raise ``AssertionError`` if a bound agent still has turns it never asked for."""
        unserved = [
            f"{state.describe()} was served {state.served} of {len(state.entry.turns)} turn(s)"
            for state in self._agents.values()
            if state.entry is not None and state.served < len(state.entry.turns)
        ]
        if unserved:
            raise AssertionError("scripted model: unserved turns: " + "; ".join(unserved))


def _compaction_key(meta: RequestMetadata) -> str:
    """Each compaction of an agent binds on its own (its retries share it), never to the
    agent's own entry and state (SPEC §20)."""
    return f"{meta.agent_id}\x00compaction {meta.compaction}"


def _estimate(counted: tuple[int, int], answer_chars: int) -> Usage:
    """The usage of a call whose request has ``counted`` = (characters, characters of its
    longest already-served prefix) and whose answer has ``answer_chars``: tokens are
    characters / 4, the served prefix is read from the cache, a long new rest is written to it
    (``CACHE_WRITE_MIN_TOKENS``), a short one is plain input."""
    input_chars, shared_chars = counted
    total = input_chars // 4 or 1  # at least one token (no ``max``: this runs every call)
    read = shared_chars // 4
    if read > total:
        read = total
    rest = total - read
    written = rest if rest >= CACHE_WRITE_MIN_TOKENS else 0
    return usage_of(rest - written, answer_chars // 4 or 1, written, read)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _text_pieces(message: Message) -> list[str]:
    """The text blocks of ``message`` cut after each run of spaces (the deltas a streaming
    provider would send); none for an answer without text."""
    return re.findall(r"\S*\s*", assistant_text(message))[:-1]
