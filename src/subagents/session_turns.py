"""The parts of a ``Session`` that make it a conversation of several turns.

``MainAgent`` is the main agent set up once (tools, prompt, context, job) and run again for every
turn on the same history (the result of a turn is ``session_result``'s). Kept out of
``session.py`` so that file stays about assembling a session.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from subagents.abort import AbortSignal
from subagents.agents.agent_run import AgentFrame, AgentJob, AgentRun
from subagents.agents.reminders import TurnReminders
from subagents.events import InitEvent
from subagents.loop.query import Budget
from subagents.messages import Message, text_block, user_message
from subagents.permissions.rules import parse_rule
from subagents.tools.base import Tool

BUDGET_REASON = "max_budget_usd"
"""The abort reason of a turn stopped by ``max_budget_usd`` (result ``error_max_budget_usd``)."""

STRUCTURED_OUTPUT_NOTE = (
    "When you have the final answer, call the StructuredOutput tool exactly once with it: its "
    "input must match the tool's JSON schema. That call is your answer."
)


@dataclass(kw_only=True)
class MainAgent:
    """The main agent of a session that has started: the same job runs every turn."""

    job: AgentJob
    frame: AgentFrame
    poller: asyncio.Task[None]
    cwd: str
    reminders: TurnReminders | None = None
    """The main agent's catalog reminders (``agents.reminders``), for each turn's message."""
    started: bool = False
    """Whether the history was set up (the first turn a hook did not refuse)."""

    @property
    def run(self) -> AgentRun:
        return self.job.run

    @property
    def caller(self) -> Any:
        return self.job.caller

    def turn_message(self, prompt: str) -> Message:
        """A later turn's user message: the prompt, with what the catalog says changed."""
        blocks = self.reminders.next_blocks() if self.reminders is not None else []
        return user_message([text_block(prompt), *blocks]) if blocks else user_message(prompt)

    def init_event(self, mcp_servers: list[dict[str, str]]) -> InitEvent:
        return InitEvent(
            session_id=self.run.agent_id,
            model=self.job.caller.model.name,
            cwd=self.cwd,
            tools=[tool.name for tool in self.job.tools],
            agent=self.run.ref,
            mcp_servers=mcp_servers,
        )

    def begin_turn(self, abort: AbortSignal, prompt: str | None, budget: Budget) -> None:
        """A new turn: its own abort signal (an interrupt ends this turn only), ``budget``
        counted from here, and the run record running again."""
        run, stats = self.job.run, self.job.run.stats
        self.job.ctx.abort = abort
        if not run.prompt and prompt:
            run.prompt = prompt  # what a scripted model binds the main agent by
        self.job.budget = Budget(
            max_turns=_offset(budget.max_turns, stats.num_turns),
            max_tokens=_offset(budget.max_tokens, stats.usage.total),
            max_wall_ms=budget.max_wall_ms,
        )
        run.status = "running"


def _offset(limit: int | None, spent: int) -> int | None:
    return None if limit is None else spent + limit


def session_id_for(session_id: str | None, resume: str | None, fork: bool) -> str:
    """A resumed session keeps its id, unless it is forked; a new one may be given its id."""
    if session_id is not None:
        try:
            uuid.UUID(session_id)
        except ValueError:
            raise ValueError(f"--session-id {session_id!r}: not a UUID") from None
        if resume and not fork:
            raise ValueError("--session-id with --resume needs --fork-session")
        return session_id
    if resume and not fork:
        return resume
    return str(uuid.uuid4())


def select_tools(
    tools: list[Tool[Any]], names: Sequence[str] | None, disallowed: Sequence[str]
) -> list[Tool[Any]]:
    """``--tools`` keeps only the named tools (``default`` = all); a bare tool name in
    ``--disallowedTools`` takes the tool away (a rule with a specifier stays a deny rule)."""
    if names is not None and list(names) != ["default"]:
        wanted = set(names)
        unknown = wanted - {t.name for t in tools} - {a for t in tools for a in t.aliases}
        if unknown:
            raise ValueError(f"--tools: unknown tool(s): {', '.join(sorted(unknown))}")
        tools = [t for t in tools if t.name in wanted or set(t.aliases) & wanted]
    removed = {
        rule.tool
        for rule in (parse_rule(text, "--disallowedTools") for text in disallowed)
        if rule.specifier is None
    }
    return [t for t in tools if t.name not in removed and not set(t.aliases) & removed]
