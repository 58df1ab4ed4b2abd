"""The messages a session's main agent starts from: a new prompt, or a resumed conversation.

A resumed session continues its durable history (``agents.recovery``): tool calls a crash left
unanswered get results (an adopted foreground child's output, or an "interrupted" error), and
finished background children whose notification the transcript lacks are queued in the inbox,
once each. A fork starts a new transcript, so the history is written to it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from subagents.agents import recovery
from subagents.agents.reminders import TurnReminders
from subagents.loop.inbox import Inbox
from subagents.messages import Message, user_message
from subagents.state import ProjectState
from subagents.store.protocol import Store


@dataclass(frozen=True, kw_only=True)
class HistorySource:
    """Where a resumed history comes from, and where what it still owes goes."""

    resume: str | None
    session_id: str
    cwd: Path
    state: ProjectState
    store: Store
    inbox: Inbox
    max_result: int


def starting_history(
    source: HistorySource, prompt: str, reminders: TurnReminders | None = None
) -> tuple[list[Message], int]:
    """The messages to start from, and how many of them the transcript already holds."""
    resume = source.resume
    if not resume:
        first = reminders.first_message(prompt) if reminders else user_message(prompt)
        return [first], 0
    path = source.state.session_transcript(resume)
    if not path.exists():
        raise ValueError(f"--resume {resume}: no such session in {source.cwd}")
    loaded = recovery.load_session(path)
    history = loaded.messages
    records = source.store.list_agents(source.cwd, session_id=resume)
    repair = recovery.repair_unanswered(
        history, records, session_id=resume, project_path=str(source.cwd)
    )
    owed = recovery.pending_notifications(
        history, records, max_result=source.max_result, earlier=loaded.earlier
    )
    for item in owed:
        source.inbox.put(item)
    resumed = recovery.resumed_user_message(repair, prompt)
    if reminders is not None:
        # The definitions may have changed since: the resumed run gets the current catalog.
        resumed = user_message([*repair, *reminders.first_blocks(prompt)])
    logged = 0 if source.session_id != resume else len(history)
    return [*history, resumed], logged
