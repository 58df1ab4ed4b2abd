"""Manual compaction of a saved session (``Session.compact``, ``subagents compact``).

Claude Code's ``/compact [instructions]``, for a session on disk: the main agent's durable
history is summarised by the session's model with the same ``Compactor`` an automatic compaction
uses (trigger ``manual``: PreCompact/PostCompact hooks, the ``compaction`` event, the files read
last read again), and the boundary is appended to the session's transcript, so the next
``--resume`` continues from the summary. Nothing else runs: no tool call of the history is
repeated and no child starts. Tool calls a crash left unanswered get their results first (as a
resume gives them), so the summary request is a valid conversation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from subagents.agents import recovery
from subagents.loop.compaction import CompactionPolicy, CompactionResult, Compactor
from subagents.loop.history_trim import history_tokens
from subagents.loop.query import tool_lookup
from subagents.messages import ContentBlock, user_message
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
        return await compactor.compact(
            "manual",
            ordinal=1,
            tokens_before=history_tokens(parts.system, messages),
            instructions=instructions,
            continue_work=False,
        )
    finally:
        writer.flush()
        writer.close()
