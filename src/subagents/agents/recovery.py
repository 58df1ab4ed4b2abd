"""Crash recovery at start-up: orphaned children, interrupted parent turns, result adoption.

**Orphans** (``reconcile_orphans``, run when a session starts). A child whose sidecar says
``running`` while its owner process is gone (``is_alive`` compares the PID *and* the process
start identity, so a reused PID does not count as the owner; an owner on another host, which
cannot be probed, is gone when its heartbeat in a shared store has expired: ``owner_liveness``)
was cut off by a crash. For each one whose lease this process can take (two processes
recovering at once: the lease decides, and the record is re-read under it, so the work is done
once):

1. kill the child's leftover process groups (``agents.orphan_processes``: only groups that are
   verifiably still the recorded ones);
2. read its transcript and repair the interrupted turn: everything after the last
   ``turn_completed`` marker (and a torn last line) is cut off; a durable history that ends
   with unanswered tool calls gets error results saying a restart interrupted them;
3. decide: the last durable turn ends with an assistant text and no tool call → ``completed``
   with that text (``restartRecovery: completed``); otherwise ``failed`` with
   ``interrupted by a restart``, resumable under a new id (``restartRecovery: interrupted``);
   a history that cannot be verified → ``failed``, ``restartRecovery: failed``, never
   resumable, never adopted;
4. settle a recorded worktree (``worktree.settle_orphan``), fire SubagentStop, release the lease.

*Merging transcript and sidecar history by maximal overlap.* In designs where the sidecar keeps
its own copy of (a prefix of) the conversation, recovery must splice the two where they overlap
most. Here the sidecar does not duplicate messages: it holds the run's *prompt* (the first
message) and the transcript holds the conversation. The merge therefore reduces to checking that
the two overlap in that one message — a durable transcript must begin with a user message carrying
the sidecar's prompt (otherwise it belongs to something else: unverifiable) — and, when the
transcript holds no durable turn at all (the crash came between the record's creation and the
transcript's first write), to rebuilding the history from the sidecar alone: ``[prompt]``, written
as the transcript's first turn, so a later ``resume_from`` has a verifiable history to continue.

**Parent repair and adoption** (``repair_unanswered``, pure, used by a resumed session). Since
the loop flushes an assistant message with tool calls before the calls run, a parent killed
mid-call resumes with unanswered ``tool_use`` blocks. Each gets a result: the completed output of
a *foreground* child when every field ties the child to that very call (SPEC §9: tool call id,
session and project, description, explicit type, a fresh lineage, a completed result), and an
``is_error`` result saying the call was interrupted by a restart otherwise — never an adopted
background, killed or unverified child.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from subagents.agents.notifications import AgentNotice, notification_id, render_notification
from subagents.agents.orphan_processes import kill_leftovers, pids_path
from subagents.agents.transcript_repair import (
    UnverifiableTranscript,
    append_turn,
    cut_to_durable,
    inspect_transcript,
)
from subagents.hooks.engine import HookEngine
from subagents.loop.inbox import InboxItem
from subagents.messages import (
    ContentBlock,
    Message,
    ToolResultBlock,
    assistant_text,
    blocks_of,
    message_text,
    tool_result_block,
    tool_uses,
    user_message,
)
from subagents.state import ProjectState, ensure_private_dir
from subagents.store.capabilities import OwnerHeartbeats, RunningIndex
from subagents.store.errors import StoreError
from subagents.store.process_identity import (
    ProcessIdentity,
    current_identity,
    hostname,
    is_alive,
)
from subagents.store.protocol import Store
from subagents.store.records import RunResult, SidecarRecord, WorktreeInfo, is_visible

log = logging.getLogger(__name__)

INTERRUPTED_ERROR = "interrupted by a restart"
INTERRUPTED_CALL_TEXT = (
    "This tool call was interrupted by a restart of the runtime before it returned a result. "
    "Its effects, if any, are unknown: check before relying on them, and retry if needed."
)
AGENT_TOOL_NAMES = frozenset({"Agent", "Task"})
_TASK_ID = re.compile(r"<task-id>([A-Za-z0-9_-]+)</task-id>")

Outcome = Literal["completed", "interrupted", "failed"]


@dataclass(kw_only=True, frozen=True)
class Verdict:
    """What a child's durable history says about how its run ended."""

    outcome: Outcome
    result_text: str = ""
    detail: str = ""


@dataclass(kw_only=True)
class RecoveryResult:
    """One reconciled orphan."""

    agent_id: str
    outcome: Outcome
    detail: str = ""
    killed_groups: list[int] = field(default_factory=list)
    worktree_outcome: str | None = None


# -- orphans ---------------------------------------------------------------------------------


OwnerAlive = Callable[[ProcessIdentity, "float | None"], bool]
"""Whether a running record's owner lives, given its identity and the record's last activity."""


def _probe(owner: ProcessIdentity, recorded_at: float | None) -> bool:
    return is_alive(owner, recorded_at=recorded_at)


def owner_liveness(store: Store) -> OwnerAlive:
    """How recovery tells a live owner: its process on this host (``is_alive``); on another
    host, which cannot be probed, its heartbeat where the store keeps them
    (``OwnerHeartbeats``: expired, or never beat, is dead) — else it counts as alive."""
    if not isinstance(store, OwnerHeartbeats):
        return _probe
    here = hostname()

    def alive(owner: ProcessIdentity, recorded_at: float | None) -> bool:
        if owner.hostname is not None and owner.hostname != here:
            return not store.owner_expired(owner)
        return is_alive(owner, recorded_at=recorded_at)

    return alive


def is_orphan(record: SidecarRecord, alive: OwnerAlive = _probe) -> bool:
    """Running, and its owner is gone: its process on this host (a reused PID is not the
    owner), or by ``alive`` (``owner_liveness``: a remote owner's expired heartbeat)."""
    if record.status != "running":
        return False
    owner = record.process
    return owner is None or not alive(owner, record.last_active_at)


async def reconcile_orphans(
    store: Store, state: ProjectState, *, hooks: HookEngine | None = None
) -> list[RecoveryResult]:
    """Reconcile every orphaned child of ``state.project`` (see the module docstring).

    Idempotent: a reconciled record is terminal and is skipped next time; a record whose lease
    another live process holds is left to that process. ``hooks`` is the session's
    ``HookEngine`` (SubagentStop fires once per recovered child), or None.
    """
    # Inline, not on a thread: this reads only the `.running` index (usually empty) and the
    # records it names, at session start, before any agent runs.
    records = _candidates(store, state)
    alive = owner_liveness(store)
    results: list[RecoveryResult] = []
    for record in records:
        if not is_orphan(record, alive):
            continue
        try:
            result = await _reconcile_one(store, record, hooks, alive)
        except (OSError, StoreError) as exc:
            log.warning("recovery of agent %s failed: %s", record.agent_id, exc)
            continue
        if result is not None:
            results.append(result)
    return results


def _candidates(store: Store, state: ProjectState) -> list[SidecarRecord]:
    """Records that may be orphans: the running ones (a FileStore keeps an index of them, so a
    project's thousands of finished runs are not read at every start)."""
    if isinstance(store, RunningIndex):
        return store.list_running(state.project)
    return [r for r in store.list_agents(state.project) if r.status == "running"]


async def _reconcile_one(
    store: Store, record: SidecarRecord, hooks: HookEngine | None, alive: OwnerAlive
) -> RecoveryResult | None:
    me = current_identity()
    if not await asyncio.to_thread(store.take_lease, record.agent_id, me):
        return None
    try:
        result = await asyncio.to_thread(_settle_record, store, record.agent_id, alive)
        if result is None:
            return None
        current = await asyncio.to_thread(store.get, record.agent_id)
        if current is not None and current.worktree is not None:
            result.worktree_outcome = await _settle_worktree(store, current, result.outcome)
    finally:
        await asyncio.to_thread(store.release_lease, record.agent_id, me)
    if hooks is not None:
        await _fire_stop(hooks, record)
    return result


def _settle_record(store: Store, agent_id: str, alive: OwnerAlive) -> RecoveryResult | None:
    """Under the lease: re-read (another recoverer may have finished), kill, repair, decide."""
    record = store.get(agent_id)
    if record is None or not is_orphan(record, alive):
        return None
    killed: list[int] = []
    if record.transcript_path is not None:
        killed = kill_leftovers(pids_path(Path(record.transcript_path)))
    verdict = repair_child_transcript(record)
    store.update(agent_id, **terminal_changes(verdict))
    log.info("recovered agent %s: %s (%s)", agent_id, verdict.outcome, verdict.detail)
    return RecoveryResult(
        agent_id=agent_id, outcome=verdict.outcome, detail=verdict.detail, killed_groups=killed
    )


def terminal_changes(verdict: Verdict) -> dict[str, Any]:
    """The sidecar fields a verdict sets."""
    if verdict.outcome == "completed":
        return {
            "status": "completed",
            "result": RunResult(text=verdict.result_text, reason="completed"),
            "restart_recovery": "completed",
            "resumable": True,
            "process": None,
        }
    error = INTERRUPTED_ERROR
    if verdict.outcome == "failed":
        error = f"{INTERRUPTED_ERROR}; history could not be verified: {verdict.detail}"
    return {
        "status": "failed",
        "result": RunResult(text=verdict.result_text, reason="interrupted", error=error),
        "restart_recovery": verdict.outcome,
        "resumable": verdict.outcome == "interrupted",
        "process": None,
    }


def repair_child_transcript(record: SidecarRecord) -> Verdict:
    """Decide the run's end from its transcript, and leave the transcript resumable."""
    path = Path(record.transcript_path) if record.transcript_path is not None else None
    return transcript_verdict(path, record.prompt)


def transcript_verdict(path: Path | None, prompt: str) -> Verdict:
    """``repair_child_transcript`` for a run known by its transcript and prompt (a child whose
    Ray host died under it is reconciled by the driver with this, as an orphan is here)."""
    if path is None:
        return Verdict(outcome="failed", detail="the run has no transcript")
    try:
        state = inspect_transcript(path)
    except UnverifiableTranscript as exc:
        return Verdict(outcome="failed", detail=str(exc))
    if state.markers == 0 and not state.interrupted:
        # No durable turn yet: the sidecar's prompt is the whole history (module docstring).
        # Not even a folder when the child never started (a Ray host that had not run it yet).
        cut_to_durable(path, state)
        ensure_private_dir(path.parent)
        append_turn(path, [user_message(prompt)], turn=1)
        return Verdict(outcome="interrupted", detail="no durable turn; rebuilt from the sidecar")
    if state.markers == 0:
        return Verdict(outcome="failed", detail=f"{path}: no completed turn marker")
    if not _starts_with_prompt(state.opening, prompt):
        return Verdict(outcome="failed", detail=f"{path}: does not begin with the run's prompt")
    cut_to_durable(path, state)
    return _decide(path, state.durable, state.markers)


def _decide(path: Path, durable: list[Message], markers: int) -> Verdict:
    last = durable[-1]
    if last["role"] == "assistant" and not tool_uses(last) and assistant_text(last).strip():
        return Verdict(outcome="completed", result_text=assistant_text(last))
    repair = interrupted_results(last)
    if repair:
        append_turn(path, [user_message(list(repair))], turn=markers + 1)
    partial = _last_assistant_text(durable)
    return Verdict(outcome="interrupted", result_text=partial, detail="the last turn did not end")


def _starts_with_prompt(messages: list[Message], prompt: str) -> bool:
    """The overlap check: the run's prompt is in its opening user message(s) (a fork's prompt
    rides at the end of the parent history it starts from)."""
    if not messages or messages[0]["role"] != "user":
        return False
    opening = [m for m in messages if m["role"] == "user" and not _is_tool_results(m)]
    return any(prompt in message_text(m) for m in opening)


def _is_tool_results(message: Message) -> bool:
    return any(block["type"] == "tool_result" for block in blocks_of(message))


def _last_assistant_text(messages: list[Message]) -> str:
    for message in reversed(messages):
        if message["role"] == "assistant":
            return assistant_text(message)
    return ""


def interrupted_results(message: Message) -> list[ToolResultBlock]:
    """Error results for every tool call of ``message`` (an assistant message), else none."""
    if message["role"] != "assistant":
        return []
    return [
        tool_result_block(c["id"], INTERRUPTED_CALL_TEXT, is_error=True) for c in tool_uses(message)
    ]


async def _settle_worktree(store: Store, record: SidecarRecord, outcome: Outcome) -> str | None:
    """Apply the keep/remove rule to the orphan's worktree; the record notes the outcome."""
    info = record.worktree
    if info is None or info.outcome != "active":
        return None
    path = Path(info.path)
    data = {"path": info.path, "name": path.name, "branch": info.branch}
    if path.parent.name == "worktrees" and path.parent.parent.name == ".subagents":
        data["repoRoot"] = str(path.parents[2])
    try:
        from subagents.worktrees.git import settle_orphan  # only for a recorded worktree

        settled = await settle_orphan(data, completed=outcome == "completed")
    except Exception as exc:  # a worktree problem must not stop the recovery of the run
        log.warning("worktree of agent %s not settled: %s", record.agent_id, exc)
        return None
    new_info = WorktreeInfo(
        path=info.path, branch=info.branch, outcome="kept" if settled.kept else "removed"
    )
    await asyncio.to_thread(store.update, record.agent_id, worktree=new_info)
    return new_info.outcome


async def _fire_stop(hooks: HookEngine, record: SidecarRecord) -> None:
    try:
        await hooks.ensure_stopped(record.agent_id, record.agent_type, record.transcript_path or "")
    except Exception:
        log.exception("SubagentStop hook failed for recovered agent %s", record.agent_id)


# -- a resumed parent ------------------------------------------------------------------------


def repair_unanswered(
    messages: Sequence[Message],
    records: Sequence[SidecarRecord],
    *,
    session_id: str,
    project_path: str,
) -> list[ToolResultBlock]:
    """Results for the unanswered tool calls at the end of a resumed history (pure).

    Empty when the history does not end with an assistant message that made tool calls. An
    ``Agent`` call gets its foreground child's completed output when ``adoptable``; every other
    call gets an ``is_error`` result saying a restart interrupted it.
    """
    if not messages or messages[-1]["role"] != "assistant":
        return []
    results: list[ToolResultBlock] = []
    for call in tool_uses(messages[-1]):
        child = None
        if call["name"] in AGENT_TOOL_NAMES:
            child = next(
                (
                    r
                    for r in records
                    if adoptable(
                        r,
                        call_id=call["id"],
                        call_input=call["input"],
                        session_id=session_id,
                        project_path=project_path,
                    )
                ),
                None,
            )
        if child is None:
            results.append(tool_result_block(call["id"], INTERRUPTED_CALL_TEXT, is_error=True))
        else:
            results.append(tool_result_block(call["id"], adopted_text(child)))
    return results


def adoptable(
    record: SidecarRecord,
    *,
    call_id: str,
    call_input: dict[str, Any],
    session_id: str,
    project_path: str,
) -> bool:
    """SPEC §9 result adoption: every field must tie the child to this very call."""
    explicit_type = call_input.get("subagent_type")
    return (
        record.tool_use_id == call_id
        and is_visible(record, session_id=session_id, project_path=project_path)
        and record.description == call_input.get("description")
        and isinstance(explicit_type, str)
        and record.agent_type == explicit_type
        and record.lineage.resumed_from is None
        and not record.is_background
        and record.status == "completed"
        and record.restart_recovery in (None, "completed")
        and bool(record.result.text)
    )


def adopted_text(record: SidecarRecord) -> str:
    """The adopted child's output, shaped like the foreground ``completed`` result."""
    stats = record.stats
    trailer = (
        f"[agentId: {record.agent_id} · type: {record.agent_type} · tool uses: "
        f"{stats.total_tool_use_count} · tokens: {stats.total_tokens} · "
        f"duration: {stats.total_duration_ms} ms · result recovered after a restart]"
    )
    return f"{record.result.text}\n\n{trailer}"


def resumed_user_message(repair: list[ToolResultBlock], prompt: str) -> Message:
    """The first new message of a resumed session: repaired results (if any), then the prompt."""
    if not repair:
        return user_message(prompt)
    blocks: list[ContentBlock] = [*repair, {"type": "text", "text": prompt}]
    return user_message(blocks)


def delivered_task_ids(messages: Sequence[Message]) -> set[str]:
    """Task ids whose notification the parent's transcript already holds (its acknowledgement)."""
    found: set[str] = set()
    for message in messages:
        if message["role"] != "user":
            continue
        for block in blocks_of(message):
            if block["type"] == "text":
                found.update(_TASK_ID.findall(block["text"]))
    return found


def pending_notifications(
    messages: Sequence[Message],
    records: Sequence[SidecarRecord],
    *,
    max_result: int,
    earlier: Sequence[Message] = (),
) -> list[InboxItem]:
    """Notifications a resumed session still owes its main agent, oldest first: terminal
    background children whose task id is not in the transcript yet (each exactly once).
    ``earlier`` is the history a compaction replaced: a notification summarised away was
    delivered all the same."""
    delivered = delivered_task_ids(messages) | delivered_task_ids(earlier)
    items: list[InboxItem] = []
    for record in records:
        if not record.is_background or not record.is_terminal:
            continue
        if record.agent_id in delivered:
            continue
        text = render_notification(notice_for(record), max_result=max_result)
        items.append(InboxItem(id=notification_id(record.agent_id), text=text))
    return items


def notice_for(record: SidecarRecord) -> AgentNotice:
    kept = record.worktree if record.worktree and record.worktree.outcome == "kept" else None
    return AgentNotice(
        task_id=record.agent_id,
        description=record.description,
        agent_type=record.agent_type,
        status=record.status,
        result=record.result.text,
        error=record.result.error,
        output_file=record.output_path,
        tool_uses=record.stats.total_tool_use_count,
        total_tokens=record.stats.total_tokens,
        duration_ms=record.stats.total_duration_ms,
        worktree_path=kept.path if kept else None,
        worktree_branch=kept.branch if kept else None,
    )


@dataclass(kw_only=True, frozen=True)
class SessionHistory:
    """A resumed session's durable history, and what compaction boundaries replaced of it."""

    messages: list[Message]
    earlier: list[Message] = field(default_factory=list)


def load_session(path: Path) -> SessionHistory:
    """A resumed session's durable history; the transcript is cut back to it first, so the new
    run appends after its last completed turn (never after a torn line or a lost turn)."""
    try:
        state = inspect_transcript(path)
    except UnverifiableTranscript as exc:
        raise ValueError(f"cannot resume: {exc}") from exc
    cut_to_durable(path, state)
    return SessionHistory(messages=state.durable, earlier=state.replaced)


def load_session_history(path: Path) -> list[Message]:
    """``load_session(path).messages``."""
    return load_session(path).messages
