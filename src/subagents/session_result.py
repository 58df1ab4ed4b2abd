"""What a ``Session`` turn returns: the result payload of SPEC §19 and Claude Code's fields
beside it (cost, per-model usage, denials, API time, stop and terminal reasons).

``turn_result`` turns a loop outcome into the ``SessionResult``; the subtype follows the
outcome, with the budget and structured-output cases a session adds on top of the loop's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from subagents.agents.agent_run import AgentRun
from subagents.loop.query import LoopOutcome
from subagents.messages import Usage
from subagents.models.pricing import cost_usd
from subagents.session_options import SUBTYPES, SessionOptions, SessionResult, reason_text
from subagents.session_turns import BUDGET_REASON
from subagents.tools.base import Tool
from subagents.tools.structured_output import StructuredOutputTool


def turn_result(
    outcome: LoopOutcome,
    duration_ms: int,
    *,
    options: SessionOptions,
    session_id: str,
    agents: Sequence[AgentRun],
    warnings: Sequence[str],
    denials: list[dict[str, Any]],
    structured: Any,
) -> SessionResult:
    """The result of a turn; ``agents`` is every agent of the session, the main agent first,
    and ``structured`` the StructuredOutput tool's value (None when it was not called)."""
    subtype = SUBTYPES[outcome.reason]
    if outcome.reason == "aborted" and outcome.error == BUDGET_REASON:
        subtype = "error_max_budget_usd"
    if subtype == "success" and options.json_schema is not None and structured is None:
        subtype = "error_max_structured_output_retries"
    text = outcome.final_text
    if subtype == "error_max_budget_usd":
        text = f"Reached the budget of ${options.max_budget_usd} (max_budget_usd)"
    elif subtype == "error_max_structured_output_retries":
        text = "The model ended without a valid StructuredOutput call"
    elif subtype != "success":
        text = outcome.error or reason_text(outcome.reason)
    payload: dict[str, Any] = {
        "type": "result",
        "subtype": subtype,
        "is_error": subtype != "success",
        "result": text,
        "session_id": session_id,
        "num_turns": outcome.stats.num_turns,
        "duration_ms": duration_ms,
        "usage": total_usage(agents).to_dict(),
        "agents": [run.summary() for run in agents],
        "warnings": list(warnings),
        **result_fields(agents, outcome, denials),
        "errors": [text] if subtype != "success" else [],
    }
    if options.json_schema is not None:
        payload["structured_output"] = structured
    return SessionResult(payload=payload, agents=list(agents), outcome=outcome)


def structured_value(tools: Sequence[Tool[Any]]) -> Any:
    """What the main agent's StructuredOutput tool holds (None: not called, or no such tool)."""
    for tool in tools:
        if isinstance(tool, StructuredOutputTool):
            return tool.value
    return None


def total_usage(agents: Sequence[AgentRun]) -> Usage:
    total = Usage()
    for run in agents:
        total.add(run.usage)
    return total


def result_fields(
    agents: Sequence[AgentRun], outcome: LoopOutcome, denials: list[dict[str, Any]]
) -> dict[str, Any]:
    """Claude Code's result fields (added beside SPEC §19's)."""
    model_usage = model_usage_of(agents)
    return {
        "duration_api_ms": sum(run.stats.api_ms for run in agents),
        "total_cost_usd": round(sum(entry["costUSD"] for entry in model_usage.values()), 6),
        "modelUsage": model_usage,
        "permission_denials": [
            {k: v for k, v in denial.items() if k != "agent_id"} for denial in denials
        ],
        "stop_reason": last_stop_reason(outcome),
        "terminal_reason": outcome.reason,
    }


def model_usage_of(agents: Sequence[AgentRun]) -> dict[str, dict[str, Any]]:
    by_model: dict[str, Usage] = {}
    for run in agents:
        total = by_model.setdefault(run.model or "unknown", Usage())
        total.add(run.usage)
    return {
        name: {
            "inputTokens": usage.input_tokens,
            "outputTokens": usage.output_tokens,
            "cacheReadInputTokens": usage.cache_read_input_tokens,
            "cacheCreationInputTokens": usage.cache_creation_input_tokens,
            "webSearchRequests": 0,
            "costUSD": cost_usd(name, usage),
            "contextWindow": 0,
            "maxOutputTokens": 0,
        }
        for name, usage in by_model.items()
    }


def last_stop_reason(outcome: LoopOutcome) -> str | None:
    """``end_turn`` when the main agent answered, ``tool_use`` when it stopped mid-calls."""
    messages = outcome.messages
    if not messages or messages[-1]["role"] != "assistant":
        return None
    content = messages[-1]["content"]
    if isinstance(content, list) and any(b["type"] == "tool_use" for b in content):
        return "tool_use"
    return "end_turn"
