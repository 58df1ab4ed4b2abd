"""Verification tracking (SPEC §14): remind the coordinator to check delegated work.

Delegated work is easy to over-trust: a child's report says "done", and the coordinator has no
way to tell a careful report from a hopeful one. After ``threshold`` (3) completed delegated tasks
with no verification step, the session queues a reminder into the coordinator's inbox that rides
along (``wakes=False``): it arrives with the next tool results or the next child's notification,
never as a model call of its own: spawn the built-in ``verification`` agent to check the work
independently. The runtime never starts one by itself — the coordinator decides what to check.

A verification child's result carries its verdict (``parse_verdict``: exactly one of PASS, FAIL,
PARTIAL, else none) and its evidence. Evidence comes from the structured metadata of the tool
calls the child actually made — files changed by Write/Edit, commands run by Bash with their exit
codes — never from its prose, which could claim a test run that never happened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from subagents.agents.agent_run import AgentRun
from subagents.agents.builtin import VERIFICATION, parse_verdict
from subagents.agents.runtime import AgentRuntime
from subagents.loop.inbox import Inbox, InboxItem

VERIFICATION_AGENT_TYPE = VERIFICATION.name
REMINDER_THRESHOLD = 3

REMINDER_TEXT = """\
<system-reminder>
{count} delegated tasks have completed since the last verification step. Before you rely on
their reports or tell the user the work is done, spawn the built-in `verification` agent
(subagent_type "verification") to check the work independently: give it what was supposed to
change and how to check it. It runs builds, tests and commands itself and answers with one
verdict: PASS, FAIL or PARTIAL. Do not verify it yourself instead, and do not skip this step
unless the tasks changed nothing that can be checked.
</system-reminder>"""


def collect_evidence(run: AgentRun) -> dict[str, Any]:
    """Files changed and commands run (with exit codes), from the run's tool-call metadata."""
    files: set[str] = set()
    commands: list[dict[str, Any]] = []
    for call in run.stats.call_outputs:
        output = call.output
        metadata = output.metadata if output is not None else None
        if not metadata:
            continue
        changed = metadata.get("files_changed")
        if isinstance(changed, list):
            files.update(str(path) for path in changed)
        if "command" in metadata and "exit_code" in metadata:
            commands.append({"command": metadata["command"], "exit_code": metadata["exit_code"]})
    return {"files_changed": sorted(files), "commands": commands}


def verification_metadata(run: AgentRun) -> dict[str, Any]:
    """What a verification child's result metadata carries: its verdict and its evidence."""
    return {"verdict": parse_verdict(run.result_text), "evidence": collect_evidence(run)}


@dataclass(kw_only=True)
class VerificationTracker:
    """Counts completed delegated tasks since the last verification child; one per session."""

    threshold: int = REMINDER_THRESHOLD
    completed: int = 0
    """Completed delegated tasks since the last verification (or the last delivered reminder)."""
    pending: bool = False
    """A reminder was handed out and has not been delivered yet."""
    issued: int = 0

    def note_completed(self, agent_type: str) -> None:
        """A delegated task completed; a completed verification child starts the count afresh."""
        if agent_type == VERIFICATION_AGENT_TYPE:
            self.completed = 0
            self.pending = False
            return
        self.completed += 1

    def reminder(self) -> str | None:
        """The reminder text when it is due and none is pending, else ``None``."""
        if self.pending or self.completed < self.threshold:
            return None
        self.pending = True
        self.issued += 1
        return REMINDER_TEXT.format(count=self.completed)

    def delivered(self) -> None:
        """The coordinator saw the reminder: the next one needs ``threshold`` more tasks."""
        self.pending = False
        self.completed = 0


def install_verification(runtime: AgentRuntime, inbox: Inbox) -> VerificationTracker:
    """Track the session's delegated tasks; queue the reminder into the coordinator's inbox.

    Only the coordinator's own delegations count (children at depth 1): what a child delegates
    is that child's business, and its report already covers it.
    """
    tracker = VerificationTracker()

    def on_child_done(run: AgentRun) -> None:
        if run.depth != 1 or run.status != "completed":
            return
        tracker.note_completed(run.agent_type)
        text = tracker.reminder()
        if text is not None:
            item_id = f"verification-reminder:{tracker.issued}"
            # A rider: the completing child's own notification follows (after its durable
            # terminal write) and wakes the coordinator; the reminder must not wake it first.
            inbox.put(InboxItem(id=item_id, text=text, on_delivered=tracker.delivered, wakes=False))

    runtime.on_child_done.append(on_child_done)
    return tracker
