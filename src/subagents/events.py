"""Events a run emits while it happens.

Every agent loop (the main one and each child) pushes events into one ``EventSink``; the CLI's
``stream-json`` output is these events, one JSON object per line. Each event names the agent it
comes from (``agent_id``, ``agent_type``, ``parent_agent_id``) so a UI can show what every child is
doing right now.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from subagents.messages import Message, Usage


@dataclass(kw_only=True, slots=True, frozen=True)
class AgentRef:
    """Identity of the agent an event belongs to."""

    agent_id: str
    agent_type: str
    parent_agent_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "agent_type": self.agent_type,
            "parent_agent_id": self.parent_agent_id,
        }


def new_ref(*, agent_id: str, agent_type: str, parent_agent_id: str | None) -> AgentRef:
    """``AgentRef(agent_id=..., ...)`` with each slot set by its own descriptor: each child
    makes one, and a frozen class's ``__init__`` sets each field through
    ``object.__setattr__`` after a keyword call (7.3 k instructions against 3.7 k;
    docs/performance.md, session 15). ``tests/test_run_builders.py`` holds it to the class."""
    ref: AgentRef = _new(AgentRef)
    _set_agent_id(ref, agent_id)
    _set_agent_type(ref, agent_type)
    _set_parent_agent_id(ref, parent_agent_id)
    return ref


_new = object.__new__
_set_agent_id = AgentRef.__dict__["agent_id"].__set__
_set_agent_type = AgentRef.__dict__["agent_type"].__set__
_set_parent_agent_id = AgentRef.__dict__["parent_agent_id"].__set__


@dataclass(kw_only=True, slots=True)
class InitEvent:
    """A session (or agent) started: its model, folder and tools."""

    type: Literal["system"] = "system"
    session_id: str
    model: str
    cwd: str
    tools: list[str]
    agent: AgentRef
    mcp_servers: list[dict[str, str]] = field(default_factory=list)
    """``{name, status}`` of each configured MCP server (Claude Code's init field)."""

    def to_dict(self) -> dict[str, Any]:
        line = {
            "type": "system",
            "subtype": "init",
            "session_id": self.session_id,
            "model": self.model,
            "cwd": self.cwd,
            "tools": self.tools,
            **self.agent.to_dict(),
        }
        if self.mcp_servers:
            line["mcp_servers"] = self.mcp_servers
        return line


@dataclass(kw_only=True, slots=True)
class AssistantEvent:
    """One assistant message of an agent, with its usage."""

    type: Literal["assistant"] = "assistant"
    agent: AgentRef
    message: Message
    usage: Usage
    model: str = ""
    """The model that answered (after any fallback switch)."""
    stop_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "assistant",
            "message": self.message,
            "usage": self.usage.to_dict(),
            **self.agent.to_dict(),
        }


@dataclass(kw_only=True, slots=True)
class ToolResultsEvent:
    """The user-role message carrying a turn's tool results, in call order."""

    type: Literal["user"] = "user"
    agent: AgentRef
    message: Message
    outputs: list[dict[str, Any] | None] = field(default_factory=list)
    """Each tool result's structured output (``ToolOutput.metadata``), in block order."""

    def to_dict(self) -> dict[str, Any]:
        return {"type": "user", "message": self.message, **self.agent.to_dict()}


@dataclass(kw_only=True, slots=True)
class ProgressEvent:
    """Progress of a running tool (``tool_progress``) or of a running child (``agent_progress``)."""

    type: Literal["progress"] = "progress"
    agent: AgentRef
    subtype: str
    data: dict[str, Any] = field(default_factory=dict)
    tool_use_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "progress", "subtype": self.subtype, **self.data}
        if self.tool_use_id is not None:
            out["tool_use_id"] = self.tool_use_id
        out.update(self.agent.to_dict())
        return out


@dataclass(kw_only=True, slots=True)
class SystemEvent:
    """Runtime notices: a retried model call, a fallback model switch, a warning."""

    type: Literal["system"] = "system"
    agent: AgentRef
    subtype: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "system", "subtype": self.subtype, **self.data, **self.agent.to_dict()}


@dataclass(kw_only=True, slots=True)
class NotificationEvent:
    """A background task's completion notification delivered into an agent's conversation."""

    type: Literal["task_notification"] = "task_notification"
    agent: AgentRef
    task_id: str
    status: str
    summary: str
    output_file: str | None = None
    usage: dict[str, int] | None = None
    """``total_tokens``, ``tool_uses``, ``duration_ms`` of the child."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "task_notification",
            "task_id": self.task_id,
            "status": self.status,
            "summary": self.summary,
            **self.agent.to_dict(),
        }


@dataclass(kw_only=True, slots=True)
class CompactionEvent:
    """An agent's history was compacted (docs/compaction.md): how, and its size before and
    after (``tokens_after`` is an estimate: characters / 4 of system prompt and history)."""

    type: Literal["compaction"] = "compaction"
    agent: AgentRef
    trigger: Literal["auto", "manual"]
    method: Literal["summary", "cleared", "truncated"]
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "compaction",
            "trigger": self.trigger,
            "method": self.method,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            **self.agent.to_dict(),
        }


@dataclass(kw_only=True, slots=True)
class ResultEvent:
    """The end of the session's main agent: the same object ``--output-format json`` prints."""

    type: Literal["result"] = "result"
    payload: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return self.payload


Event: TypeAlias = (
    InitEvent
    | AssistantEvent
    | ToolResultsEvent
    | ProgressEvent
    | SystemEvent
    | NotificationEvent
    | CompactionEvent
    | ResultEvent
)
EventSink: TypeAlias = Callable[[Event], None]


def discard(_event: Event) -> None:
    """An event sink for runs nobody watches (benchmarks, fire-and-forget)."""
