"""``Telemetry``: the runtime's ``RunObserver`` as OpenTelemetry spans, span events and metrics.

The span tree (docs/telemetry.md, "Spans"): ``session`` → ``invoke_agent main`` → ``chat …`` and
``execute_tool …``; a foreground child's ``invoke_agent`` under the ``execute_tool Agent`` span
that spawned it; a background child's under the agent that launched it, linked to the call.
Parents are chosen explicitly from the spans this object keeps per agent and per open tool call,
not left to whatever context a task happened to copy; each span is also made current in the
task that runs it (attached at start, detached at end, both in one coroutine), so other
instrumentation nests under it and ``trace_env`` hands it to subprocesses.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.propagators.textmap import DefaultGetter
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from subagents.events import AgentRef, Event, NotificationEvent, SystemEvent
from subagents.models.base import MessageDone, Model, ModelRequest
from subagents.observe import (
    AgentEnd,
    AgentStart,
    AttributeValue,
    provider_name,
    set_trace_env,
)
from subagents.telemetry import content
from subagents.telemetry.attributes import (
    agent_of,
    end_attributes,
    error_type,
    package_version,
    running_attributes,
    selected,
    terminated,
    usage_attributes,
)
from subagents.telemetry.instruments import Instruments

SCOPE = "subagents"
_PROPAGATOR = TraceContextTextMapPropagator()
_QUIET_EVENTS = frozenset(
    {"AssistantEvent", "ToolResultsEvent", "ProgressEvent", "InitEvent", "ResultEvent"}
)
"""Stream events the spans already carry (or that are too frequent to be events)."""
_QUIET_SUBTYPES = frozenset({"agent_started"})
"""System events the spans already carry: a child's start is its ``invoke_agent`` span (whose
description is recorded only with tool details on)."""


@dataclass(kw_only=True, slots=True)
class _AgentState:
    span: Span
    agent_type: str
    session_id: str
    is_background: bool
    open: bool = True


@dataclass(kw_only=True)
class Telemetry:
    """OpenTelemetry for one or more sessions (docs/telemetry.md)."""

    tracer_provider: trace.TracerProvider | None = None
    """Default: the global one (``trace.get_tracer_provider()``)."""
    meter_provider: metrics.MeterProvider | None = None
    log_prompts: bool = False
    tool_details: bool = False
    flush_at_session_end: bool = False
    """Set when this object built the providers (``from_environment``): a CLI run exits right
    after its session, so what is batched is sent when the session ends."""
    _agents: dict[str, _AgentState] = field(default_factory=dict, init=False)
    _sessions: dict[str, Span] = field(default_factory=dict, init=False)
    _calls: dict[tuple[str, str], SpanContext] = field(default_factory=dict, init=False)
    """(agent id, tool_use id) → its ``execute_tool`` span, kept for the session: a background
    child starts after the call that launched it has ended, and links to it."""
    _open: dict[int, Span] = field(default_factory=dict, init=False)
    _denied: set[int] = field(default_factory=set, init=False)
    _providers: dict[str, str] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        provider = self.tracer_provider or trace.get_tracer_provider()
        version = package_version()
        self.tracer = provider.get_tracer(SCOPE, version)
        meters = self.meter_provider or metrics.get_meter_provider()
        self.instruments = Instruments(meters.get_meter(SCOPE, version))
        set_trace_env(trace_env)

    # -- sessions and agents --------------------------------------------------------------

    def session_started(self, session_id: str, model: str) -> _SessionObservation:
        attributes = {
            "session.id": session_id,
            "gen_ai.conversation.id": session_id,
            "gen_ai.request.model": model,
        }
        span = self.tracer.start_span("session", _session_parent(), attributes=attributes)
        self._sessions[session_id] = span
        # Current for the whole run: what starts before the main agent (MCP servers) continues
        # the session's trace, and events of that phase have a span to land on.
        return _SessionObservation(self, session_id, span, self._attach(span))

    def agent_started(self, start: AgentStart) -> _AgentObservation:
        ref = start.agent
        parent_ctx, links = self._agent_parent(start)
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": start.provider,
            "gen_ai.agent.name": ref.agent_type,
            "gen_ai.agent.id": ref.agent_id,
            "gen_ai.request.model": start.model,
            "subagents.agent.depth": start.depth,
            "subagents.agent.source": start.source,
            "subagents.agent.is_fork": start.is_fork,
            "subagents.agent.is_background": start.is_background,
        }
        if ref.parent_agent_id:
            attributes["subagents.agent.parent_id"] = ref.parent_agent_id
        if self.tool_details and start.description:
            attributes["gen_ai.agent.description"] = content.capped(start.description)
        if self.log_prompts and start.prompt:
            attributes["gen_ai.input.messages"] = content.input_messages(start.prompt)
        span = self.tracer.start_span(
            f"invoke_agent {ref.agent_type}", parent_ctx, attributes=attributes, links=links
        )
        span.add_event("subagents.agent.selected", selected(start))
        state = _AgentState(
            span=span,
            agent_type=ref.agent_type,
            session_id=self._session_of(ref),
            is_background=start.is_background,
        )
        self._agents[ref.agent_id] = state
        if start.depth > 0:
            self.instruments.running.add(
                1, running_attributes(state.agent_type, state.is_background)
            )
        return _AgentObservation(self, ref, state, start, self._attach(span))

    def _agent_parent(self, start: AgentStart) -> tuple[otel_context.Context, list[Link]]:
        """A background child: under its owner, linked to the call that launched it; any
        other child: under that call; the main agent: under its session."""
        ref = start.agent
        parent_id = ref.parent_agent_id
        if parent_id is None:
            session = self._sessions.get(ref.agent_id)
            if session is None:
                return otel_context.get_current(), []
            return trace.set_span_in_context(session), []
        call = self._calls.get((parent_id, start.tool_use_id or ""))
        owner = self._agents.get(parent_id)
        if start.is_background and owner is not None:
            links = []
            if call is not None:
                links.append(Link(call, {"subagents.link": "launched_by"}))
            return trace.set_span_in_context(owner.span), links
        if call is not None:
            return trace.set_span_in_context(NonRecordingSpan(call)), []
        if owner is not None:
            return trace.set_span_in_context(owner.span), []
        return otel_context.get_current(), []

    def _session_of(self, ref: AgentRef) -> str:
        if ref.parent_agent_id is None:
            return ref.agent_id
        parent = self._agents.get(ref.parent_agent_id)
        return parent.session_id if parent is not None else ref.parent_agent_id

    # -- model and tool calls -------------------------------------------------------------

    def model_call_started(self, model: Model, request: ModelRequest) -> _ModelObservation:
        agent = self._agents.get(request.metadata.agent_id)
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self._provider(model),
            "gen_ai.request.model": model.name,
        }
        agent_type = request.metadata.agent_type
        compaction = request.metadata.compaction
        if compaction:  # a summary call: the agent pays for it, so it is counted as that agent
            attributes["subagents.call.purpose"] = "compaction"
            if agent is not None:
                agent_type = agent.agent_type
        call_attributes = {**attributes, "gen_ai.agent.name": agent_type}
        attributes["gen_ai.request.max_tokens"] = request.max_tokens
        attributes["gen_ai.agent.id"] = request.metadata.agent_id
        if compaction:
            attributes["subagents.compaction.ordinal"] = compaction
        span = self.tracer.start_span(
            f"chat {model.name}",
            _under(agent),
            kind=SpanKind.CLIENT,
            attributes={**attributes, "gen_ai.agent.name": agent_type},
        )
        return _ModelObservation(self, span, self._attach(span), call_attributes, model.name)

    def _provider(self, model: Model) -> str:
        provider = self._providers.get(model.name)
        if provider is None:  # a protocol check per call would cost more than the span
            provider = self._providers[model.name] = provider_name(model)
        return provider

    def tool_call_started(
        self, agent: AgentRef, name: str, tool_use_id: str, tool_input: Mapping[str, Any]
    ) -> _ToolObservation:
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": tool_use_id,
            "gen_ai.tool.type": "extension" if name.startswith("mcp__") else "function",
            "gen_ai.agent.name": agent.agent_type,
            "gen_ai.agent.id": agent.agent_id,
        }
        if self.tool_details:
            attributes["gen_ai.tool.call.arguments"] = content.as_json(tool_input)
        span = self.tracer.start_span(
            f"execute_tool {name}", _under(self._agents.get(agent.agent_id)), attributes=attributes
        )
        self._calls[(agent.agent_id, tool_use_id)] = span.get_span_context()
        return _ToolObservation(self, span, self._attach(span), agent.agent_type, name)

    # -- records and events ---------------------------------------------------------------

    def record(self, agent: AgentRef, name: str, attributes: Mapping[str, AttributeValue]) -> None:
        span = self._target(agent)
        if span is None:
            return
        kept = {
            key: content.capped(value) if isinstance(value, str) else value
            for key, value in attributes.items()
            if self.tool_details or key not in content.CONTENT_KEYS
        }
        span.add_event(f"subagents.{name}", kept)
        if name == "permission.decision" and attributes.get("behavior") == "deny":
            self._denied.add(span.get_span_context().span_id)

    def event(self, event: Event) -> None:
        """Runtime events as span events: system events by subtype, anything new by type."""
        kind = type(event).__name__
        if kind in _QUIET_EVENTS:
            return
        if isinstance(event, SystemEvent) and event.subtype in _QUIET_SUBTYPES:
            return
        if isinstance(event, SystemEvent):
            self._event(event.agent, event.subtype, event.data)
        elif isinstance(event, NotificationEvent):
            owner = AgentRef(agent_id=event.agent.parent_agent_id or "", agent_type="")
            data = {"task_id": event.task_id, "status": event.status}
            self._event(owner, "task_notification", data)
        else:  # e.g. compaction: named by its own type
            data = event.to_dict()
            self._event(agent_of(data), str(data.get("type", kind)), data)

    def _event(self, agent: AgentRef, name: str, data: Mapping[str, Any]) -> None:
        span = self._target(agent)
        if span is not None:
            fields = content.scalar_fields(data)
            for key in ("type", "subtype", "agent_id", "agent_type", "parent_agent_id"):
                fields.pop(key, None)
            span.add_event(f"subagents.{name}", fields)

    def _target(self, agent: AgentRef) -> Span | None:
        """The span an event belongs to: the current one when it is ours (a tool or model
        call in progress), else the agent's own."""
        current = trace.get_current_span()
        span_id = current.get_span_context().span_id
        if span_id in self._open:
            return self._open[span_id]
        state = self._agents.get(agent.agent_id)
        return state.span if state is not None and state.open else None

    def _attach(self, span: Span) -> object:
        self._open[span.get_span_context().span_id] = span
        return otel_context.attach(trace.set_span_in_context(span))

    def _close(self, span: Span, token: object) -> None:
        span_id = span.get_span_context().span_id
        self._open.pop(span_id, None)
        self._denied.discard(span_id)
        _detach(token)
        span.end()

    def _forget_session(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        ended = {a for a, s in self._agents.items() if s.session_id == session_id}
        for agent_id in ended:
            del self._agents[agent_id]
        for key in [k for k in self._calls if k[0] in ended]:
            del self._calls[key]

    def flush(self) -> None:
        """Send whatever the providers hold (spans batched, metrics not yet exported)."""
        for provider in (self.tracer_provider, self.meter_provider):
            force_flush = getattr(provider, "force_flush", None)  # SDK providers have one
            if force_flush is not None:
                force_flush()


class _SessionObservation:
    def __init__(self, owner: Telemetry, session_id: str, span: Span, token: object) -> None:
        self.owner, self.session_id, self.span, self.token = owner, session_id, span, token

    def end(self, end: AgentEnd | None) -> None:
        self.owner._close(self.span, self.token)
        self.owner._forget_session(self.session_id)
        if self.owner.flush_at_session_end:
            self.owner.flush()


class _AgentObservation:
    def __init__(
        self,
        owner: Telemetry,
        ref: AgentRef,
        state: _AgentState,
        start: AgentStart,
        token: object,
    ) -> None:
        self.owner, self.ref, self.state, self.start, self.token = owner, ref, state, start, token

    def end(self, end: AgentEnd | None) -> None:
        span, state, start = self.state.span, self.state, self.start
        if end is not None:
            span.set_attributes(end_attributes(end))
            if end.is_background and not start.is_background:
                span.add_event("subagents.agent.moved_to_background")
            span.add_event("subagents.agent.terminated", terminated(start, end))
            if end.status != "completed":
                span.set_attribute("error.type", end.reason or end.status)
                span.set_status(Status(StatusCode.ERROR, end.error or end.reason))
            if self.owner.log_prompts and end.final_text:
                span.set_attribute("subagents.agent.result", content.capped(end.final_text))
            reason = {"gen_ai.agent.name": self.ref.agent_type, "reason": end.reason}
            self.owner.instruments.agent_runs.add(1, reason)
        if start.depth > 0:
            self.owner.instruments.running.add(
                -1, running_attributes(state.agent_type, state.is_background)
            )
        state.open = False
        self.owner._close(span, self.token)


class _ModelObservation:
    def __init__(
        self,
        owner: Telemetry,
        span: Span,
        token: object,
        call: dict[str, AttributeValue],
        model: str,
    ) -> None:
        self.owner, self.span, self.token, self.call, self.model = owner, span, token, call, model
        self.started = time.perf_counter()

    def end(self, done: MessageDone | None, error: BaseException | None) -> None:
        seconds = time.perf_counter() - self.started
        span, instruments = self.span, self.owner.instruments
        if done is not None:
            response_model = done.model or self.model
            usage = done.usage
            span.set_attributes(
                {
                    "gen_ai.response.model": response_model,
                    "gen_ai.response.finish_reasons": [done.stop_reason],
                    **usage_attributes(usage),
                }
            )
            if self.owner.log_prompts:
                output = content.output_messages(done.message, done.stop_reason)
                span.set_attribute("gen_ai.output.messages", output)
            agent_type = str(self.call["gen_ai.agent.name"])
            instruments.model_call(usage, response_model, self.call, agent_type, seconds)
        else:
            kind = error_type(error)
            span.set_attribute("error.type", kind)
            span.set_status(Status(StatusCode.ERROR, str(error) if error else kind))
            instruments.failed_call({**self.call, "error.type": kind}, seconds)
        self.owner._close(span, self.token)


class _ToolObservation:
    def __init__(
        self,
        owner: Telemetry,
        span: Span,
        token: object,
        agent_type: str,
        name: str,
    ) -> None:
        self.owner, self.span, self.token = owner, span, token
        self.name, self.agent_type = name, agent_type
        self.started = time.perf_counter()

    def end(self, *, content: str, is_error: bool, cancelled: bool = False) -> None:
        owner, span = self.owner, self.span
        denied = span.get_span_context().span_id in owner._denied
        outcome = (
            "cancelled" if cancelled else "denied" if denied else "error" if is_error else "ok"
        )
        if outcome != "ok":
            kind = {"denied": "permission_denied", "error": "tool_error"}.get(outcome, outcome)
            span.set_attribute("error.type", kind)
            span.set_status(Status(StatusCode.ERROR, kind))
        if owner.tool_details and not cancelled:
            span.set_attribute("gen_ai.tool.call.result", _capped(content))
        seconds = time.perf_counter() - self.started
        owner.instruments.tool_call(self.name, self.agent_type, outcome, seconds)
        owner._close(span, self.token)


def _capped(text: str) -> str:
    return content.capped(text)


def _under(agent: _AgentState | None) -> otel_context.Context:
    if agent is None:
        return otel_context.get_current()
    return trace.set_span_in_context(agent.span)


def _session_parent() -> otel_context.Context:
    """The caller's span, else the ``TRACEPARENT`` this process was started with."""
    current = otel_context.get_current()
    if trace.get_current_span(current).get_span_context().is_valid:
        return current
    carrier = {
        key.lower(): value
        for key in ("TRACEPARENT", "TRACESTATE")
        if (value := os.environ.get(key))
    }
    return _PROPAGATOR.extract(carrier, getter=DefaultGetter()) if carrier else current


def trace_env() -> dict[str, str]:
    """The current span as ``TRACEPARENT``/``TRACESTATE`` (``observe.trace_env``)."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return {key.upper(): value for key, value in carrier.items()}


def _detach(token: object) -> None:
    try:
        otel_context.detach(token)  # type: ignore[arg-type]  # the token attach returned
    except Exception:  # a detach from another context must not fail a run
        pass
