"""The model protocol: one async streaming interface every provider implements.

A provider receives a ``ModelRequest`` and yields ``StreamEvent``s; the last one is always a
``MessageDone`` carrying the complete assistant message, its usage and stop reason. Everything a
provider may fail with is a ``ModelError`` whose ``kind`` tells the retry policy what to do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from subagents.abort import AbortSignal
from subagents.messages import Message, Usage

ErrorKind: TypeAlias = Literal[
    "overloaded", "rate_limit", "api_error", "connection", "fallback", "invalid_request", "auth"
]
RETRYABLE_KINDS: frozenset[str] = frozenset({"overloaded", "rate_limit", "api_error", "connection"})


class ModelError(Exception):
    """A failed model call. ``kind`` decides between retry, fallback and giving up."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE_KINDS


@dataclass(kw_only=True, slots=True)
class RequestMetadata:
    """Who is asking: lets a scripted model bind agents and tests assert on prompts."""

    agent_id: str
    agent_type: str
    prompt: str
    compaction: int = 0
    """For a summary request (``agent_type`` "compact"): the compacted agent's n-th compaction,
    from 1; 0 for every other request. The scripted model binds each compaction on its own."""
    team_name: str | None = None
    """The team of a teammate (docs/teams.md); None for every other agent."""
    name: str | None = None
    """A teammate's member name in its team."""


@dataclass(kw_only=True, slots=True)
class ToolSchema:
    """A tool as the model sees it: name, description, JSON schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


@dataclass(kw_only=True, slots=True)
class ModelRequest:
    """Everything one model call needs. ``messages`` is the agent's live history: read-only.

    A loop sends the same request object on each of its calls (only ``messages`` grows, in
    place, and the caller sets ``model``): read it during the call, copy what you keep."""

    model: str
    system: str
    messages: list[Message]
    tools: list[ToolSchema]
    metadata: RequestMetadata
    max_tokens: int = 8192
    thinking: dict[str, Any] | None = None
    abort: AbortSignal | None = None


def new_metadata(
    *, agent_id: str, agent_type: str, prompt: str, team_name: str | None, name: str | None
) -> RequestMetadata:
    """``RequestMetadata(agent_id=..., ...)`` of these fields (``compaction`` 0) with every
    field set directly: each agent's loop makes one, and a class called with keywords packs
    them into a dict and unpacks it for ``__init__`` (docs/performance.md, session 15).
    ``tests/test_run_builders.py`` holds it to the class."""
    metadata: RequestMetadata = _new(RequestMetadata)
    metadata.agent_id = agent_id
    metadata.agent_type = agent_type
    metadata.prompt = prompt
    metadata.compaction = 0
    metadata.team_name = team_name
    metadata.name = name
    return metadata


def new_request(
    *,
    model: str,
    system: str,
    messages: list[Message],
    tools: list[ToolSchema],
    metadata: RequestMetadata,
    max_tokens: int,
    thinking: dict[str, Any] | None,
    abort: AbortSignal | None,
) -> ModelRequest:
    """``ModelRequest(model=..., ...)`` with every field set directly: each agent's loop makes
    one (and sends it on every call), and a class called with eight keywords packs them into a
    dict and unpacks it for ``__init__`` (docs/performance.md, session 15).
    ``tests/test_run_builders.py`` holds it to the class."""
    request: ModelRequest = _new(ModelRequest)
    request.model = model
    request.system = system
    request.messages = messages
    request.tools = tools
    request.metadata = metadata
    request.max_tokens = max_tokens
    request.thinking = thinking
    request.abort = abort
    return request


@dataclass(kw_only=True, slots=True)
class TextDelta:
    """A piece of the answer's text, as it streams."""

    type: Literal["text_delta"] = "text_delta"
    text: str


@dataclass(kw_only=True, slots=True)
class MessageDone:
    """The end of a response: the whole message, its usage and why it stopped."""

    type: Literal["message_done"] = "message_done"
    message: Message
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = "end_turn"
    model: str = ""


def message_done(message: Message, usage: Usage, stop_reason: str, model: str) -> MessageDone:
    """``MessageDone(message=..., usage=..., stop_reason=..., model=...)`` with every field set
    directly: the providers build one per model call, and a class called with keywords packs
    them into a dict and unpacks it for ``__init__`` (~4,300 instructions against ~1,300,
    callgrind; docs/performance.md, session 11)."""
    done: MessageDone = _new(MessageDone)
    done.type = "message_done"
    done.message = message
    done.usage = usage
    done.stop_reason = stop_reason
    done.model = model
    return done


_new = object.__new__


StreamEvent: TypeAlias = TextDelta | MessageDone


@runtime_checkable
class Model(Protocol):
    """A chat model. ``name`` is the resolved model id reported in results."""

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Yield events for one call, ending with exactly one ``MessageDone``."""
        ...


Responder: TypeAlias = Callable[[ModelRequest], Awaitable[MessageDone]]
"""A model's optional ``respond``: its whole answer as one ``MessageDone``."""


async def complete(model: Model, request: ModelRequest) -> MessageDone:
    """Drain a stream and return its final event (providers must send one).

    A model whose answer is always one event (the scripted model) may also offer
    ``async respond(request) -> MessageDone``, which ``stream`` must wrap exactly; it is called
    directly, sparing an async generator per call."""
    respond = responder(model)
    if respond is not None:
        return await respond(request)
    return await drain(model.stream(request), model.name)


def responder(model: Model) -> Responder | None:
    """The model's ``respond`` (see ``complete``), or None when it only streams."""
    respond: Responder | None = getattr(model, "respond", None)
    return respond


async def drain(events: AsyncIterator[StreamEvent], name: str) -> MessageDone:
    """The final event of a stream; a stream without one is an ``api_error``."""
    done: MessageDone | None = None
    async for event in events:
        if isinstance(event, MessageDone):
            done = event
    if done is None:
        raise ModelError("api_error", f"model {name!r} ended its stream without a message")
    return done
