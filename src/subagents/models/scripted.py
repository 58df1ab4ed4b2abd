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
tokens of the longest prefix (system prompt and tool schemas, then messages in order) that this
request shares with *any* earlier request to this model are ``cache_read_input_tokens``; the rest
is ``cache_creation_input_tokens`` when it is at least ``CACHE_WRITE_MIN_TOKENS`` (a long new
part is what a provider writes to its cache) and plain ``input_tokens`` otherwise (a short tail
after the cached prefix). The three always add up to the plain estimate (characters / 4). Every
served request counts as written, as if the client put a cache breakpoint on its last message.

Prefixes are never serialised whole: every served prefix is a node of a tree whose roots
fingerprint the system prompt and the tool array (memoised by the list's identity). A node's
first child is known by identity alone; only when a second, different message follows the same
prefix (two agents, a fork) are its children fingerprinted and told apart by content, each
message once (memoised by its identity, keeping a reference so the id cannot be reused). An
agent keeps its place in the tree between calls, so a call costs O(new messages) and an agent's
own history, growing call after call, is never fingerprinted; a fork, whose history is the
parent's own message objects, walks the parent's nodes by identity. Past ``_MEMO_LIMIT``
prefixes the tree starts afresh (as a provider's cache expires).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import marshal
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import orjson

from subagents.messages import ContentBlock, Message, Usage, assistant_text
from subagents.models.base import (
    ErrorKind,
    MessageDone,
    ModelError,
    ModelRequest,
    RequestMetadata,
    StreamEvent,
    TextDelta,
    ToolSchema,
)
from subagents.models.script_binding import EntryIndex
from subagents.models.script_schema import (
    ErrorSpec,
    ScriptAgent,
    ScriptError,
    ScriptFile,
    ScriptTurn,
    load_script_file,
    parse_script,
    parse_turn,
)
from subagents.models.script_templates import (
    RenderContext,
    Renderer,
    Template,
    compile_template,
    compile_value,
)

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

_ERROR_KINDS: dict[str, tuple[ErrorKind, int | None]] = {
    "overloaded": ("overloaded", 529),
    "rate_limit": ("rate_limit", 429),
    "api_error": ("api_error", 500),
    "fallback": ("fallback", None),
}
_PROMPT_SHOWN = 200

CACHE_WRITE_MIN_TOKENS = 1024
"""An uncached part this long is reported as cache creation; shorter, as plain input."""
_MEMO_LIMIT = 65_536


# --- compiled script -------------------------------------------------------------------------


@dataclass(kw_only=True, slots=True)
class _Call:
    """A compiled tool call of a scripted turn."""

    name: str
    input: dict[str, Any]
    render: Renderer | None
    chars: int


@dataclass(kw_only=True, slots=True)
class _Turn:
    """A compiled scripted turn."""

    text: str | Template | None
    calls: tuple[_Call, ...]
    delay_s: float
    stream_s: float
    usage: dict[str, int] | None
    error: ErrorSpec | None
    captures: tuple[tuple[str, re.Pattern[str]], ...]
    needs_context: bool


@dataclass(kw_only=True, slots=True)
class _Entry:
    """A compiled script entry: which agents it binds and their turns."""

    index: int
    agent_type: str | None
    match: re.Pattern[str] | None
    turns: tuple[_Turn, ...]

    def describe(self) -> str:
        kind = self.agent_type or "any type"
        return f"#{self.index} {kind}" + (f" /{self.match.pattern}/" if self.match else "")


def _compile_turn(turn: ScriptTurn) -> _Turn:
    text = None if turn.text is None else compile_template(turn.text)
    calls = tuple(_compile_call(c.name, c.input) for c in turn.tool_calls)
    return _Turn(
        text=text,
        calls=calls,
        delay_s=turn.delay_ms / 1000,
        stream_s=turn.stream_ms / 1000,
        usage=None if turn.usage is None else turn.usage.model_dump(),
        error=turn.error,
        captures=tuple((name, re.compile(p)) for name, p in turn.capture.items()),
        needs_context=isinstance(text, Template) or any(c.render for c in calls),
    )


def _compile_call(name: str, tool_input: dict[str, Any]) -> _Call:
    render = compile_value(tool_input)
    return _Call(name=name, input=tool_input, render=render, chars=len(name) + _chars(tool_input))


def _compile_entry(index: int, agent: ScriptAgent) -> _Entry:
    return _Entry(
        index=index,
        agent_type=agent.agent_type,
        match=None if agent.match is None else re.compile(agent.match),
        turns=tuple(_compile_turn(t) for t in agent.turns),
    )


def _chars(value: Any) -> int:
    """Characters of a JSON value, roughly as a tokenizer would see them (keys included)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        total = 0
        for key, item in value.items():
            # Strings inline: tool inputs are mostly flat dicts of strings.
            total += len(key) + (len(item) if isinstance(item, str) else _chars(item))
        return total
    if isinstance(value, list):
        return sum(_chars(v) for v in value)
    return len(str(value))


def _message_chars(message: Message) -> int:
    content = message["content"]
    if isinstance(content, str):
        return len(content)
    total = 0
    for block in content:
        kind = block["type"]
        if kind == "text":
            total += len(block["text"])  # type: ignore[typeddict-item]
        elif kind == "tool_result":
            inner = block["content"]  # type: ignore[typeddict-item]
            # A string result (the usual one) inline: ``_chars`` of it is its length.
            total += len(inner) if type(inner) is str else _chars(inner)
        elif kind == "tool_use":
            total += len(block["name"]) + _chars(block["input"])  # type: ignore[typeddict-item]
        elif kind == "thinking":
            total += len(block["thinking"])  # type: ignore[typeddict-item]
    return total


# --- prompt-cache estimate --------------------------------------------------------------------


def _message_fingerprint(message: Message) -> int:
    """A hash of a message's content. Messages are JSON data, and what a provider's cache sees
    is their JSON: ``orjson``'s bytes (equal content, equal bytes, keys in order; ``1``, ``1.0``
    and ``true`` apart) at about a third of ``marshal``'s cost — this runs for every new
    message. What orjson refuses (integers beyond 64 bits, non-string keys) is hashed by
    ``_content_hash``."""
    try:
        return hash(orjson.dumps(message))
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return _content_hash(message)


def _tools_fingerprint(tools: list[ToolSchema]) -> int:
    return _content_hash([(t.name, t.description, t.input_schema) for t in tools])


def _content_hash(value: Any) -> int:
    """A hash of plain data that equal content always gives. ``marshal`` format 2 writes no
    back-references (so equal values give equal bytes, whatever objects they share) and tells
    types apart like ``repr``, at two to five times its speed; anything it cannot encode falls
    back to ``repr``."""
    try:
        return hash(marshal.dumps(value, 2))
    except ValueError:
        return hash(repr(value))


def _remember(memo: dict[int, Any], key: int, value: Any) -> None:
    """Insert, dropping the oldest entry past the limit (a dropped id is simply recomputed)."""
    if len(memo) >= _MEMO_LIMIT:
        del memo[next(iter(memo))]
    memo[key] = value


class _Node:
    """One served prefix: the root (system + tools) or a prefix ending at ``message``.

    Its children are the messages that followed it in some request: while there is one, it is
    ``lone``, known by identity and never fingerprinted (an agent's own history grows that way,
    call after call); a second one turns them into ``children``, keyed by content."""

    __slots__ = ("children", "lone", "message", "size")

    def __init__(self, message: Message | None, size: int) -> None:
        self.message = message
        self.size = size
        """Characters of the prefix (the system prompt counts, tool schemas do not)."""
        self.lone: _Node | None = None
        self.children: dict[int, _Node] | None = None


class _PrefixCache:
    """Every prefix this model has served, as a tree from each root, and the memoised
    fingerprints of the messages that had to be told apart by content."""

    __slots__ = ("_messages", "_tools", "nodes", "roots")

    def __init__(self) -> None:
        self.roots: dict[int, _Node] = {}
        self.nodes = 0
        """Prefixes in the tree: past ``_MEMO_LIMIT`` it starts afresh (as a provider's cache
        expires), so the messages of long-finished agents are not kept forever."""
        self._tools: dict[int, tuple[list[ToolSchema], int]] = {}
        self._messages: dict[int, tuple[Message, int]] = {}

    def root(self, system: str, tools: list[ToolSchema]) -> tuple[_Node, bool]:
        """The root node of (system, tools), and whether it was served before."""
        entry = self._tools.get(id(tools))
        if entry is None or entry[0] is not tools:
            entry = (tools, _tools_fingerprint(tools))
            _remember(self._tools, id(tools), entry)
        key = hash((system, entry[1]))
        node = self.roots.get(key)
        if node is not None:
            return node, True
        node = self.roots[key] = _Node(None, len(system))
        self.count()
        return node, False

    def fingerprint(self, message: Message) -> int:
        """The message's fingerprint, computed once per message object."""
        memo = self._messages
        key = id(message)
        entry = memo.get(key)
        if entry is None or entry[0] is not message:
            entry = (message, _message_fingerprint(message))
            _remember(memo, key, entry)
        return entry[1]

    def child(self, parent: _Node, message: Message) -> _Node | None:
        """The prefix ``parent`` + ``message`` if it was served before, else None."""
        lone = parent.lone
        if lone is not None:
            if lone.message is message:  # the same object: a fork's copy of its parent's history
                return lone
            # A second message after this prefix: from now on its children are told by content.
            assert lone.message is not None
            parent.children = {self.fingerprint(lone.message): lone}
            parent.lone = None
        elif parent.children is None:
            return None
        return parent.children.get(self.fingerprint(message))

    def add(self, parent: _Node, message: Message, size: int) -> _Node:
        """A new prefix after ``child`` found none."""
        node = _Node(message, size)
        children = parent.children
        if children is None:
            parent.lone = node
        else:
            children[self.fingerprint(message)] = node  # memoised by ``child`` already
        self.nodes += 1
        if self.nodes > _MEMO_LIMIT:
            self.start_afresh()
        return node

    def count(self) -> None:
        self.nodes += 1
        if self.nodes > _MEMO_LIMIT:
            self.start_afresh()

    def start_afresh(self) -> None:
        """Forget every prefix: agents holding nodes of the old tree go on from them (their
        own prefixes stay cached), new requests find none."""
        self.roots = {}
        self.nodes = 0


# --- per-agent state -------------------------------------------------------------------------


@dataclass(kw_only=True, slots=True)
class _AgentState:
    """One agent's progress through its entry, its captures, and its usage-estimate counters."""

    agent_id: str
    agent_type: str
    prompt: str
    entry: _Entry | None
    match_groups: tuple[str | None, ...] = ()
    served: int = 0
    failures: int = 0
    pending: _Turn | None = None
    captures: dict[str, str] = field(default_factory=dict)
    counted_messages: int = 0
    tip: _Node | None = None
    """The prefix of the last request (its ``message`` is the last counted one)."""
    base: _Node | None = None
    """The root ``tip`` grows from."""
    root_of: tuple[str, list[ToolSchema], _Node] | None = None
    """(system, tools, root) of the last call: an agent sends the same objects each time."""
    answer: Message | None = None
    answer_chars: int = 0
    """The last answer this model built for the agent, with the characters counted as it was
    built (``_message_chars`` of it, without walking its tool inputs again): the loop sends
    the same object back in the agent's next request."""

    def input_chars(self, request: ModelRequest, cache: _PrefixCache) -> tuple[int, int]:
        """(system + message characters, characters of the longest already-served prefix).

        Only messages not seen on earlier calls are looked at. The walk restarts from the root
        when the root changed, the history shrank or its last counted message was replaced
        (compaction, a resumed agent reusing the id). Once a prefix is new, every longer one
        is: the tree only grows from there (nothing is fingerprinted on an agent's own path).
        """
        messages = request.messages
        size = len(messages)
        root_of = self.root_of
        shared = -1  # none missed yet
        if root_of is not None and root_of[0] is request.system and root_of[1] is request.tools:
            root = root_of[2]
        else:
            root, known = cache.root(request.system, request.tools)
            self.root_of = (request.system, request.tools, root)
            if not known:
                shared = 0
        seen, node = self.counted_messages, self.tip
        if (
            node is None
            or self.base is not root
            or seen > size
            or (seen and messages[seen - 1] is not node.message)
        ):
            node, seen, self.base = root, 0, root
        answer = self.answer
        for index in range(seen, size):
            message = messages[index]
            if shared < 0:
                found = cache.child(node, message)
                if found is not None:
                    node = found
                    continue
                shared = node.size
                chars = self.answer_chars if message is answer else _message_chars(message)
                node = cache.add(node, message, node.size + chars)
                continue
            # Below a new prefix: its only child, nothing to look up (``add``, inlined).
            chars = self.answer_chars if message is answer else _message_chars(message)
            new = node.lone = _Node(message, node.size + chars)
            node = new
            cache.nodes += 1
            if cache.nodes > _MEMO_LIMIT:
                cache.start_afresh()
        self.tip, self.counted_messages = node, size
        return node.size, node.size if shared < 0 else shared

    def describe(self) -> str:
        prompt = self.prompt
        if len(prompt) > _PROMPT_SHOWN:
            prompt = prompt[:_PROMPT_SHOWN] + "..."
        return f"agent {self.agent_id!r} (type {self.agent_type!r}, prompt {prompt!r})"


def _injected_error(spec: ErrorSpec, state: _AgentState) -> ModelError:
    kind, status = _ERROR_KINDS[spec.type]
    message = (
        f"scripted {spec.type} error {state.failures} of {spec.times} for agent {state.agent_id!r}"
    )
    return ModelError(kind, message, status=status)


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
        entries: tuple[_Entry, ...] = (),
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
        self._cache = _PrefixCache()

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
        entries = tuple(_compile_entry(i, agent) for i, agent in enumerate(script.agents))
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

    def _take(self, request: ModelRequest) -> tuple[_AgentState, _Turn | None]:
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

    async def _ask(self, request: ModelRequest, state: _AgentState) -> _Turn:
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
        entry: _Entry | None,
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

    def _next_turn(self, state: _AgentState, entry: _Entry) -> _Turn:
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
    def _consume(state: _AgentState, turn: _Turn) -> _Turn:
        """Serve ``turn``, or fail it first as its ``error`` asks (then it is pending)."""
        error = turn.error
        if error is not None and state.failures < error.times:
            state.failures += 1
            state.pending = turn
            raise _injected_error(error, state)
        state.served += 1
        state.failures = 0
        state.pending = None
        return turn

    async def _ask_function(self, request: ModelRequest) -> _Turn:
        assert self._function is not None
        result = self._function(request)
        if inspect.isawaitable(result):
            result = await result
        return _compile_turn(parse_turn(result, "scripted function result"))

    # building the answer

    def _serve(self, state: _AgentState, turn: _Turn, request: ModelRequest) -> MessageDone:
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
                _capture(turn, ctx, state.captures)
        content: list[ContentBlock] = []
        chars = 0
        text = turn.text
        if text is not None:
            if isinstance(text, Template):
                assert ctx is not None
                text = text.render(ctx)
            content.append({"type": "text", "text": text})
            chars += len(text)
        chars += self._add_tool_uses(content, turn, state, ctx)
        if not content:
            content.append({"type": "text", "text": ""})
        usage = self._usage(turn, state, request, chars)
        message: Message = {"role": "assistant", "content": content}
        if turn.usage is None:  # estimating: the next request counts this answer
            state.answer, state.answer_chars = message, chars
        return MessageDone(
            message=message,
            usage=usage,
            stop_reason="tool_use" if turn.calls else "end_turn",
            model=self.name,
        )

    @staticmethod
    def _add_tool_uses(
        content: list[ContentBlock], turn: _Turn, state: _AgentState, ctx: RenderContext | None
    ) -> int:
        chars = 0
        prefix = f"toolu_{state.agent_id}_{state.served - 1}_"
        for index, call in enumerate(turn.calls):
            if call.render is None:
                tool_input = dict(call.input)
                chars += call.chars
            else:
                assert ctx is not None
                tool_input = call.render(ctx)
                chars += len(call.name) + _chars(tool_input)
            content.append(
                {
                    "type": "tool_use",
                    "id": f"{prefix}{index}",
                    "name": call.name,
                    "input": tool_input,
                }
            )
        return chars

    def _usage(self, turn: _Turn, state: _AgentState, request: ModelRequest, chars: int) -> Usage:
        if turn.usage is not None:
            return Usage(**turn.usage)
        input_chars, shared_chars = state.input_chars(request, self._cache)
        total = input_chars // 4 or 1  # at least one token (no ``max``: this runs every call)
        read = shared_chars // 4
        if read > total:
            read = total
        rest = total - read
        written = rest if rest >= CACHE_WRITE_MIN_TOKENS else 0
        return Usage(
            input_tokens=rest - written,
            output_tokens=chars // 4 or 1,
            cache_creation_input_tokens=written,
            cache_read_input_tokens=read,
        )

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


def _capture(turn: _Turn, ctx: RenderContext, captures: dict[str, str]) -> None:
    """Keep the first group (or whole match) of each capture regex found in the last user text."""
    text = ctx.last_user
    for name, pattern in turn.captures:
        found = pattern.search(text)
        if found is not None:
            captures[name] = (found.group(1) if pattern.groups else found.group(0)) or ""


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _text_pieces(message: Message) -> list[str]:
    """The text blocks of ``message`` cut after each run of spaces (the deltas a streaming
    provider would send); none for an answer without text."""
    return re.findall(r"\S*\s*", assistant_text(message))[:-1]
