"""Parallel fan-out with synthesis: N copies run concurrently, one merged answer, totals add up."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from subagents.agents.agent_run import AgentRun
from subagents.agents.synthesis import COPY_SUFFIX, MAX_PARALLEL, synthesis_prompt
from subagents.config import RuntimeConfig
from subagents.models.base import ModelRequest
from subagents.models.scripted import ScriptedModel
from subagents.session import Session, SessionOptions, SessionResult

TASK = "audit the parser module"


def delegate(prompt: str = TASK) -> dict[str, Any]:
    return {
        "name": "Agent",
        "input": {"description": "audit", "prompt": prompt, "subagent_type": "general-purpose"},
    }


def fan_out_script() -> dict[str, Any]:
    return {
        "agents": [
            {"agent_type": "main", "turns": [{"tool_calls": [delegate()]}, {"text": "FINAL"}]},
            {
                "agent_type": "general-purpose",
                "match": r"== AGENT 1 RESPONSE ==",
                "turns": [{"text": "merged answer\n{{prompt}}"}],
            },
            {
                "agent_type": "general-purpose",
                "match": r"audit the parser",  # the synthesis entry above wins for merging
                "turns": [
                    {"tool_calls": [{"name": "Glob", "input": {"pattern": "*.txt"}}]},
                    {"text": "finding-{{agent_id}}"},
                ],
            },
        ]
    }


def agent_output(result: SessionResult) -> tuple[str, dict[str, Any]]:
    """The Agent tool's result as the main agent received it: content and metadata."""
    main = result.agents[0]
    (call,) = [c for c in main.stats.call_outputs if c.tool_name == "Agent"]
    assert call.output is not None and call.output.metadata is not None
    return call.output.content, call.output.metadata


async def run_session(tmp_path: Path, config: RuntimeConfig | None) -> SessionResult:
    model = ScriptedModel.from_dict(fan_out_script())
    options = SessionOptions(model=model, cwd=tmp_path, config=config, transcripts=False)
    result = await Session(options).run("delegate the audit")
    assert result.subtype == "success", result.payload
    model.assert_complete()
    return result


async def test_three_copies_merge_into_one_answer_with_every_copy_token(tmp_path: Path) -> None:
    result = await run_session(tmp_path, RuntimeConfig(parallel_tasks_count=3))
    content, metadata = agent_output(result)
    parallel = metadata["parallel"]
    assert parallel["count"] == 3
    copy_ids = parallel["agentIds"]
    assert len(set(copy_ids)) == 3
    assert content.startswith("merged answer")
    # One synthesized answer holds each copy's unique token, in index order.
    positions = [content.index(f"finding-{agent_id}") for agent_id in copy_ids]
    assert positions == sorted(positions)
    for index in (1, 2, 3):
        assert f"== AGENT {index} RESPONSE ==" in content
    assert "== AGENT 4 RESPONSE ==" not in content
    assert metadata["status"] == "completed"
    assert metadata["agentId"] == parallel["synthesisAgentId"]
    assert metadata["prompt"] == TASK


async def test_totals_add_up_over_copies_and_synthesis(tmp_path: Path) -> None:
    result = await run_session(tmp_path, RuntimeConfig(parallel_tasks_count=3))
    _, metadata = agent_output(result)
    by_id = {run.agent_id: run for run in result.agents}
    parallel = metadata["parallel"]
    runs: list[AgentRun] = [by_id[i] for i in [*parallel["agentIds"], parallel["synthesisAgentId"]]]
    assert [run.status for run in runs] == ["completed"] * 4
    assert all(run.prompt == f"{TASK}\n\n{COPY_SUFFIX}" for run in runs[:3])
    assert metadata["totalToolUseCount"] == 3  # one Glob per copy, none in the synthesis
    assert metadata["totalTokens"] == sum(run.usage.total for run in runs)
    assert metadata["totalDurationMs"] == sum(run.duration_ms for run in runs)
    # The session's json view lists main + 3 copies + synthesis, and its usage sums them all.
    summaries = result.payload["agents"]
    assert [a["agentType"] for a in summaries] == ["main"] + ["general-purpose"] * 4
    assert sum(a["totalTokens"] for a in summaries) == sum(result.payload["usage"].values())


async def test_environment_knob_turns_fan_out_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_PARALLEL_TASKS_COUNT", "3")
    assert RuntimeConfig.from_env().parallel_tasks_count == 3
    result = await run_session(tmp_path, None)
    _, metadata = agent_output(result)
    assert metadata["parallel"]["count"] == 3


async def test_default_runs_one_child_without_synthesis(tmp_path: Path) -> None:
    script = fan_out_script()
    script["agents"][0]["turns"][1] = {"text": "FINAL {{tool_results}}"}
    model = ScriptedModel.from_dict(script)
    options = SessionOptions(model=model, cwd=tmp_path, config=RuntimeConfig(), transcripts=False)
    result = await Session(options).run("delegate")
    content, metadata = agent_output(result)
    assert "parallel" not in metadata
    assert re.match(r"finding-\S+", content)
    assert len(result.agents) == 2


async def test_at_most_ten_copies_run_at_once(tmp_path: Path) -> None:
    in_flight = 0
    peak = 0
    copies = 0

    async def answer(request: ModelRequest) -> Any:
        nonlocal in_flight, peak, copies
        meta = request.metadata
        if meta.agent_type == "main":
            return {"tool_calls": [delegate()]} if len(request.messages) == 1 else "done"
        if "== AGENT 1 RESPONSE ==" in meta.prompt:
            return "merged"
        copies += 1
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.05)  # keeps every started copy busy while the others start
        in_flight -= 1
        return f"copy {copies}"

    model = ScriptedModel.from_function(answer)
    config = RuntimeConfig(parallel_tasks_count=12)
    options = SessionOptions(model=model, cwd=tmp_path, config=config, transcripts=False)
    result = await Session(options).run("delegate")
    assert result.subtype == "success", result.payload
    assert copies == 12
    assert peak == MAX_PARALLEL
    _, metadata = agent_output(result)
    assert len(metadata["parallel"]["agentIds"]) == 12


def test_synthesis_prompt_orders_reports_and_keeps_the_task() -> None:
    prompt = synthesis_prompt("the task", ["first", "second"])
    assert prompt.startswith("Original task:\nthe task")
    assert prompt.index("== AGENT 1 RESPONSE ==\nfirst") < prompt.index(
        "== AGENT 2 RESPONSE ==\nsecond"
    )
    assert "contradict" in prompt or "disagree" in prompt
