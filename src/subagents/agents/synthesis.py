"""Parallel fan-out with synthesis (SPEC §14): N copies of one task, one merged answer.

With ``parallel_tasks_count`` > 1 a plain sync delegation runs that many copies of the child
concurrently (at most ``MAX_PARALLEL`` at once), each told to be thorough, then one more child of
the same definition — the synthesis agent — reads every copy's report, ordered by index, and
writes the single answer the caller gets. Independent attempts catch what one attempt misses;
the synthesis step keeps the caller's context to one report.

Every copy and the synthesis agent go through the ordinary sync path
(``SessionServices.run_foreground``), so each is a registered run with its own transcript,
progress and cleanup, and the session's ``agents`` list and usage totals include them all. The
returned metadata's totals add up over all of them: tool uses, tokens and agent time
(``totalDurationMs`` is the sum of the agents' durations; ``parallel.wallDurationMs`` is the
elapsed time of the whole fan-out).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from subagents.agents.agent_run import AgentFrame, AgentJob, AgentRun
from subagents.agents.assembly import assemble
from subagents.agents.fresh import ChildRequest, definition_spec
from subagents.agents.runtime import AgentRuntime
from subagents.agents.services import SessionServices
from subagents.runtime_tags import escape_runtime_tags
from subagents.tools.base import CallInfo, ToolContext, ToolOutput

MAX_PARALLEL = 10
"""Copies running at the same time; the rest wait for a slot."""

COPY_SUFFIX = "Provide a thorough, complete analysis."

_SYNTHESIS_INSTRUCTIONS = """\
Several agents worked on this task independently; their reports follow, in order.

{reports}

Write the one answer to the original task, using everything above:
1. Bring together the insights of all the agents, not just one of them.
2. Where they disagree, settle it: say which finding holds and why, checking if you need to.
3. Give a single, unified answer to the original task, not a list of the agents' views.
4. Keep every important detail, file path and code example from the reports.
5. Make it well organised and complete, but stay focused on the original task."""


def synthesis_prompt(task: str, reports: list[str]) -> str:
    """The synthesis agent's task: the original task, then each report as ``== AGENT i ==``,
    its imitated runtime tags escaped (a copy's text must not read as the runtime's)."""
    sections = "\n\n".join(
        f"== AGENT {index} RESPONSE ==\n{escape_runtime_tags(report)[0]}"
        for index, report in enumerate(reports, start=1)
    )
    return f"Original task:\n{task}\n\n" + _SYNTHESIS_INSTRUCTIONS.format(reports=sections)


def copy_prompt(task: str) -> str:
    return f"{task}\n\n{COPY_SUFFIX}"


async def run_parallel_with_synthesis(
    services: SessionServices,
    ctx: ToolContext,
    frame: AgentFrame,
    request: ChildRequest,
    count: int,
    info: CallInfo,
) -> ToolOutput:
    """Run ``count`` copies of ``request`` concurrently, then merge them with a synthesis child."""
    if count < 1:
        raise ValueError(f"parallel_tasks_count must be at least 1, got {count}")
    started = time.monotonic()
    copies = await _run_copies(services, ctx, frame, request, count, info)
    if ctx.abort.aborted:
        reason = ctx.abort.reason or "aborted"
        return ToolOutput(
            content=f"Parallel task stopped before synthesis ({reason}).",
            is_error=True,
            metadata={"status": "killed", "parallel": _parallel_meta(copies, None, started)},
        )
    synthesis_request = replace(
        request,
        prompt=synthesis_prompt(request.prompt, [report_of(run) for run in copies]),
        description=f"{request.description} (synthesis)",
    )
    job = _prepare(services.runtime, ctx, frame, synthesis_request)
    synthesized = await services.run_foreground(job, info)
    return merged_output(request.prompt, copies, job.run, synthesized, started)


async def _run_copies(
    services: SessionServices,
    ctx: ToolContext,
    frame: AgentFrame,
    request: ChildRequest,
    count: int,
    info: CallInfo,
) -> list[AgentRun]:
    """Prepare every copy up front (ids follow the index), run them ``MAX_PARALLEL`` at a time."""
    copy_request = replace(request, prompt=copy_prompt(request.prompt))
    jobs = [_prepare(services.runtime, ctx, frame, copy_request) for _ in range(count)]
    slots = asyncio.Semaphore(MAX_PARALLEL)

    async def run_one(index: int) -> None:
        async with slots:
            await services.run_foreground(jobs[index], info)

    try:
        async with asyncio.TaskGroup() as group:
            for index in range(count):
                group.create_task(run_one(index), name=f"parallel-copy:{index}")
    except BaseExceptionGroup as failed:
        # The copies' siblings are cancelled by now; report the first failure as itself.
        raise failed.exceptions[0] from None
    return [job.run for job in jobs]


def _prepare(
    runtime: AgentRuntime, ctx: ToolContext, frame: AgentFrame, request: ChildRequest
) -> AgentJob:
    return assemble(runtime, ctx, frame, definition_spec(runtime, ctx, frame, request))


def report_of(run: AgentRun) -> str:
    """A copy's final text; a copy that did not complete says so instead of vanishing."""
    if run.status == "completed":
        return run.result_text
    reason = run.error or run.reason or run.status
    partial = f"\nPartial report:\n{run.result_text}" if run.result_text else ""
    return f"(this agent ended without completing: {reason}){partial}"


def _parallel_meta(
    copies: list[AgentRun], synthesis: AgentRun | None, started: float
) -> dict[str, Any]:
    return {
        "count": len(copies),
        "agentIds": [run.agent_id for run in copies],
        "synthesisAgentId": None if synthesis is None else synthesis.agent_id,
        "wallDurationMs": int((time.monotonic() - started) * 1000),
    }


def merged_output(
    task: str, copies: list[AgentRun], synthesis: AgentRun, base: ToolOutput, started: float
) -> ToolOutput:
    """The synthesis agent's result (``base``), with totals over every copy and the synthesis."""
    runs = [*copies, synthesis]
    totals = {
        "totalToolUseCount": sum(run.stats.tool_use_count for run in runs),
        "totalTokens": sum(run.stats.usage.total for run in runs),
        "totalDurationMs": sum(run.duration_ms for run in runs),
    }
    parallel = _parallel_meta(copies, synthesis, started)
    metadata = dict(base.metadata or {})
    metadata.update(totals, prompt=task, parallel=parallel)
    trailer = (
        f"[parallel: {len(copies)} agents + synthesis · agentId: {synthesis.agent_id} · "
        f"type: {synthesis.agent_type} · tool uses: {totals['totalToolUseCount']} · "
        f"tokens: {totals['totalTokens']} · duration: {totals['totalDurationMs']} ms]"
    )
    # The synthesis child's result as ``completed_output`` made it (its report escaped, with
    # the note when anything was: it is a child's text), its trailer replaced by this one.
    content = base.content.rsplit("\n\n", 1)[0] + f"\n\n{trailer}"
    return ToolOutput(content=content, is_error=base.is_error, metadata=metadata)
