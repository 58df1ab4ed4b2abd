"""The observer seam: what the runtime tells an observer (telemetry) while a session runs.

The runtime calls a ``RunObserver`` at a few moments — a session starts, an agent starts and
ends, a model call starts and ends, a tool call starts and ends — and hands it named records
(permission decisions). Each ``*_started`` returns an observation whose ``end`` closes it, and
both are called from the same coroutine, so an implementation may make its span current for the
work in between. Where no observer is set (``ToolContext.observer``/``AgentRuntime.observer`` is
None, the default) all this costs one attribute check; the OpenTelemetry implementation lives in
``subagents.telemetry`` and is imported only when telemetry is on (docs/telemetry.md).

``trace_env`` is the other half: the environment a subprocess (a hook, an MCP server) needs to
continue the current trace, ``{}`` when telemetry is off.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

from subagents.events import AgentRef, Event
from subagents.messages import Usage
from subagents.models.base import MessageDone, Model, ModelRequest
from subagents.models.resolve import ModelFamily

AttributeValue = str | bool | int | float
"""What a record's attributes hold (what every telemetry backend accepts)."""


@dataclass(kw_only=True, slots=True, frozen=True)
class AgentStart:
    """An agent run about to start (``agents.agent_run.run_agent``)."""

    agent: AgentRef
    model: str
    provider: str
    """``provider_name`` of its model."""
    source: str
    """Where its definition came from (built-in, user, project, cli), ``fork``, or ``session``
    for the main agent."""
    is_fork: bool
    is_background: bool
    depth: int
    description: str
    prompt: str
    tool_use_id: str | None
    """The parent's tool call that started it (None for the main agent)."""


@dataclass(kw_only=True, slots=True, frozen=True)
class AgentEnd:
    """How an agent run ended."""

    status: str
    reason: str
    duration_ms: int
    usage: Usage
    num_turns: int
    tool_use_count: int
    is_background: bool
    """Where it ran at the end (a foreground child may have been moved to the background)."""
    error: str | None = None
    final_text: str = ""


class Observation(Protocol):
    """An open agent or session observation."""

    def end(self, end: AgentEnd | None) -> None: ...


class ModelCallObservation(Protocol):
    def end(self, done: MessageDone | None, error: BaseException | None) -> None: ...


class ToolCallObservation(Protocol):
    def end(self, *, content: str, is_error: bool, cancelled: bool = False) -> None: ...


class RunObserver(Protocol):
    """Told what a session does; ``subagents.telemetry.Telemetry`` turns it into OpenTelemetry."""

    def session_started(self, session_id: str, model: str) -> Observation: ...

    def agent_started(self, start: AgentStart) -> Observation: ...

    def model_call_started(self, model: Model, request: ModelRequest) -> ModelCallObservation: ...

    def tool_call_started(
        self, agent: AgentRef, name: str, tool_use_id: str, tool_input: Mapping[str, Any]
    ) -> ToolCallObservation: ...

    def record(self, agent: AgentRef, name: str, attributes: Mapping[str, AttributeValue]) -> None:
        """A named event (``permission.decision``…) in the agent's current operation."""
        ...

    def event(self, event: Event) -> None:
        """Every event of the session's stream (compaction, memory_loaded, retries…)."""
        ...


def provider_name(model: Model) -> str:
    """Who serves ``model`` (``gen_ai.provider.name``): the provider of an SDK-backed model
    (``anthropic``, ``openai``), else the prefix of its spec (``scripted``, ``local``)."""
    family = _FAMILY.get(type(model))
    if family is None:  # a runtime protocol check reads every attribute: once per class
        family = _FAMILY[type(model)] = isinstance(model, ModelFamily)
    if family:
        return cast(ModelFamily, model).provider
    return model.name.partition(":")[0] or "_OTHER"


_FAMILY: dict[type, bool] = {}


_trace_env: Callable[[], dict[str, str]] | None = None


def trace_env() -> dict[str, str]:
    """``TRACEPARENT``/``TRACESTATE`` of the current span for a subprocess's environment, or
    ``{}`` when no telemetry is on in this process (W3C trace context, spelled as environment
    variables). Hooks get it; so should anything else that starts a process worth tracing."""
    return _trace_env() if _trace_env is not None else {}


def set_trace_env(source: Callable[[], dict[str, str]]) -> None:
    """Called by a telemetry implementation when it is set up: trace context is process-wide
    (the current span lives in a context variable), so one source serves every session."""
    global _trace_env
    _trace_env = source
