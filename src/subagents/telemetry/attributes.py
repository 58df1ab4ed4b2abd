"""The attribute sets ``Telemetry`` puts on spans, span events and metrics (docs/telemetry.md):
GenAI usage, an agent run's end, the SPEC §15 "agent selected"/"agent terminated" events."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from typing import Any

from subagents.events import AgentRef
from subagents.messages import Usage
from subagents.models.base import ModelError
from subagents.observe import AgentEnd, AgentStart, AttributeValue


def usage_attributes(usage: Usage) -> dict[str, AttributeValue]:
    cache_read, cache_write = usage.cache_read_input_tokens, usage.cache_creation_input_tokens
    return {
        # The convention counts cached input in input_tokens; the split is beside it.
        "gen_ai.usage.input_tokens": usage.input_tokens + cache_read + cache_write,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": cache_read,
        "gen_ai.usage.cache_creation.input_tokens": cache_write,
    }


def end_attributes(end: AgentEnd) -> dict[str, AttributeValue]:
    return {
        "subagents.agent.status": end.status,
        "subagents.agent.reason": end.reason,
        "subagents.agent.num_turns": end.num_turns,
        "subagents.agent.tool_use_count": end.tool_use_count,
        **usage_attributes(end.usage),
    }


def selected(start: AgentStart) -> dict[str, AttributeValue]:
    """SPEC §15 "agent selected"."""
    return {
        "agent_type": start.agent.agent_type,
        "model": start.model,
        "source": start.source,
        "is_fork": start.is_fork,
        "is_async": start.is_background,
    }


def terminated(start: AgentStart, end: AgentEnd) -> dict[str, AttributeValue]:
    """SPEC §15 "agent terminated"."""
    return {
        "agent_type": start.agent.agent_type,
        "model": start.model,
        "duration_ms": end.duration_ms,
        "is_async": end.is_background,
        "reason": end.reason,
    }


def running_attributes(agent_type: str, is_background: bool) -> dict[str, AttributeValue]:
    """``subagents.agents.running``'s attributes."""
    return {"gen_ai.agent.name": agent_type, "subagents.agent.is_background": is_background}


def error_type(error: BaseException | None) -> str:
    if isinstance(error, ModelError):
        return error.kind
    if error is None:
        return "_OTHER"
    return "cancelled" if type(error).__name__ == "CancelledError" else type(error).__name__


def package_version() -> str:
    try:
        return importlib.metadata.version("subagents")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def agent_of(data: Mapping[str, Any]) -> AgentRef:
    return AgentRef(
        agent_id=str(data.get("agent_id", "")),
        agent_type=str(data.get("agent_type", "")),
        parent_agent_id=data.get("parent_agent_id"),
    )
