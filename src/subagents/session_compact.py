"""Manual compaction of a saved session (``Session.compact``, ``subagents compact``).

Claude Code's ``/compact [instructions]``, for a session on disk: the main agent's durable
history is summarised by the session's model with the same ``Compactor`` an automatic compaction
uses (trigger ``manual``: PreCompact/PostCompact hooks, the ``compaction`` event, the files read
last read again), and the boundary is appended to the session's transcript, so the next
``--resume`` continues from the summary. Nothing else runs: no tool call of the history is
repeated and no child starts. Tool calls a crash left unanswered get their results first (as a
resume gives them), so the summary request is a valid conversation.

A held session (``Session.hold``: the interactive UI's ``/compact``) is compacted in place
between turns by ``compact_held``: its live history is replaced and the boundary appended to its
transcript, so the next turn and a later ``--resume`` both continue from the summary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from subagents.agents import recovery
from subagents.agents.agent_run import AgentJob
from subagents.loop.compaction import CompactionPolicy, CompactionResult, Compactor
from subagents.loop.history_trim import history_tokens
from subagents.loop.query import tool_lookup
from subagents.messages import ContentBlock, user_message
from subagents.models.pricing import cost_usd
from subagents.models.retry import ModelCaller
from subagents.store.records import SidecarRecord
from subagents.store.transcript import TranscriptWriter
from subagents.tools.base import Tool, ToolContext


@dataclass(kw_only=True)
class MainAgentParts:
    """What the session's main agent would send: its request bytes and its context."""

    system: str
    tools: list[Tool[Any]]
    caller: ModelCaller
    policy: CompactionPolicy
    ctx: ToolContext
    restate: Callable[[], list[ContentBlock]] | None = None


async def compact_saved(
    path: Path,
    parts: MainAgentParts,
    *,
    records: list[SidecarRecord],
    instructions: str | None = None,
) -> CompactionResult:
    """Compact the session transcript at ``path``; ``records`` are the session's children (to
    answer a call a crash left open). A blocked or failed summary is in the result's method."""
    ctx = parts.ctx
    messages = recovery.load_session(path).messages
    if not messages:
        raise ValueError(f"{path}: the session has no messages to compact")
    repair = recovery.repair_unanswered(
        messages, records, session_id=ctx.agent.agent_id, project_path=str(ctx.cwd)
    )
    if repair:
        messages.append(user_message([*repair]))
    writer = TranscriptWriter(path)
    try:
        if repair:
            writer.append(messages[-1])
        compactor = Compactor(
            policy=parts.policy,
            caller=parts.caller,
            system=parts.system,
            schemas=[tool.schema() for tool in parts.tools],
            messages=messages,
            ctx=ctx,
            tools=tool_lookup(parts.tools),
            log=writer,
            restate=parts.restate,
        )
        return await _manual(compactor, ordinal=1, instructions=instructions)
    finally:
        writer.flush()
        writer.close()


async def compact_held(
    job: AgentJob, policy: CompactionPolicy, *, instructions: str | None = None
) -> CompactionResult:
    """Compact a started session's main agent between turns, in place: ``job.messages`` is
    replaced, the boundary goes to its transcript, and its stats count the summary call."""
    if not job.messages:
        raise ValueError("the session has no messages to compact yet")
    writer = TranscriptWriter(job.transcript) if job.transcript is not None else None
    stats = job.run.stats
    try:
        compactor = Compactor(
            policy=policy,
            caller=job.caller,
            system=job.system,
            schemas=job.tool_schemas,
            messages=job.messages,
            ctx=job.ctx,
            tools=tool_lookup(job.tools),
            log=writer,
            thinking=job.thinking,
            task_text=job.task_text,
            restate=job.restate,
        )
        result = await _manual(compactor, ordinal=stats.compactions + 1, instructions=instructions)
    finally:
        if writer is not None:
            writer.flush()
            writer.close()
    stats.usage.add(result.usage)
    stats.cost_usd += cost_usd(result.model or job.caller.model.name, result.usage)
    if result.method != "skipped":
        stats.compactions += 1
        stats.context_tokens = result.tokens_after
    job.logged_messages = len(job.messages)  # the new history is in the transcript already
    return result


async def _manual(
    compactor: Compactor, *, ordinal: int, instructions: str | None
) -> CompactionResult:
    """A manual compaction: the user's next prompt follows, so the model is not told to go on."""
    return await compactor.compact(
        "manual",
        ordinal=ordinal,
        tokens_before=history_tokens(compactor.system, compactor.messages),
        instructions=instructions,
        continue_work=False,
    )
