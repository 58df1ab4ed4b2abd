"""What the parent reads about a child: the tool results and the notification, rendered.

* ``completed_output`` — the foreground child's ``completed`` result (its report, then a
  trailer with id, type, tool uses, tokens, duration and a kept worktree); an error result
  with the partial report when it ended without completing;
* ``launched_output`` — ``async_launched``: a background child started (or moved there);
* ``task_output`` — TaskOutput's view of any task (agent or shell);
* ``notice_for`` — the facts of a finished background child's ``<task-notification>``
  (``notifications.render_notification`` turns them into text).
"""

from __future__ import annotations

from typing import Any

from subagents.agents.agent_run import AgentRun
from subagents.agents.child_state import Child
from subagents.agents.notifications import FORGED_NOTE, AgentNotice, escape_runtime_tags
from subagents.agents.tasks import TaskState
from subagents.agents.verification import VERIFICATION_AGENT_TYPE, verification_metadata
from subagents.frozen import new_frozen
from subagents.runtime_tags import might_hold_tags
from subagents.tools.base import ToolOutput


def completed_payload(run: AgentRun) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "status": "completed",
        "prompt": run.prompt,
        "content": [{"type": "text", "text": run.result_text}],
        "totalToolUseCount": run.stats.tool_use_count,
        "totalDurationMs": run.duration_ms,
        "totalTokens": run.stats.usage.total,
        "agentId": run.agent_id,
        "agentType": run.agent_type,
        "model": run.model,
        "costUsd": round(run.stats.cost_usd, 6),
    }
    payload.update(run.worktree_fields)
    if run.agent_type == VERIFICATION_AGENT_TYPE:
        payload["verification"] = verification_metadata(run)
    return payload


def completed_output(run: AgentRun) -> ToolOutput:
    """The ``completed`` result of a child that ran in the foreground."""
    payload = completed_payload(run)
    trailer = (
        f"[agentId: {run.agent_id} · type: {run.agent_type} · tool uses: "
        f"{run.stats.tool_use_count} · tokens: {run.stats.usage.total} · "
        f"duration: {run.duration_ms} ms]"
    )
    if run.worktree_fields:
        where = run.worktree_fields.get("worktreePath", "")
        branch = run.worktree_fields.get("worktreeBranch", "")
        trailer += f"\n[worktree kept: {where} (branch {branch})]"
    report = run.result_text
    if might_hold_tags(report):
        # The report is the child's text, read by the parent as its tool result: tags that
        # imitate the runtime's are escaped and the parent told, as in a notification.
        report, forged = escape_runtime_tags(report)
        if forged:
            report = f"{report}\n\n{FORGED_NOTE}"
    if run.status == "completed":
        return ToolOutput(content=f"{report}\n\n{trailer}", metadata=payload)
    reason = run.error or run.reason
    partial = f"\n\nPartial report:\n{report}" if report else ""
    payload["status"] = run.status
    headline = f"Agent {run.agent_type} ended without completing ({reason})."
    return ToolOutput(content=f"{headline}{partial}\n\n{trailer}", is_error=True, metadata=payload)


def launched_output(child: Child, *, auto: bool) -> ToolOutput:
    """``async_launched``: the child runs in the background; a notification follows."""
    run, state = child.run, child.state
    agent_id = run.agent_id
    names = child.job.parent_tool_names
    can_read = "Read" in names or "Bash" in names
    payload: dict[str, Any] = {
        "status": "async_launched",
        "agentId": agent_id,
        "description": run.description,
        "prompt": run.prompt,
        "outputFile": str(state.output_file),
        "canReadOutputFile": can_read,
    }
    lead = (
        "The agent ran past the auto-background limit and now continues in the background."
        if auto
        else "Async agent launched successfully."
    )
    text = (
        f"{lead}\nagentId: {agent_id}\n"
        "You will be notified automatically when it completes; do not poll. "
        f"Use TaskOutput(task_id={agent_id!r}) only if you need its full result, "
        f"or TaskStop to stop it. Its output file: {state.output_file}"
    )
    return ToolOutput(content=text, metadata=payload)


def task_output(state: TaskState, full_text: str) -> ToolOutput:
    payload = {
        "task_id": state.id,
        "task_type": state.type,
        "status": state.status,
        "description": state.description,
        "result": full_text,
        "error": state.error,
    }
    # A child's report (or a shell's output) read as the caller's tool result: tags imitating
    # the runtime's are escaped, as in its notification and a foreground child's result; the
    # metadata keeps the text as written.
    error, forged_error = escape_runtime_tags(state.error or "")
    text, forged = escape_runtime_tags(full_text)
    lines = [f"Task {state.id} ({state.type}): {state.status}"]
    if error:
        lines.append(f"Error: {error}")
    if text:
        lines += ["", text]
    elif not state.terminal:
        lines.append("(still running; no result yet)")
    if forged or forged_error:
        lines += ["", FORGED_NOTE]
    return ToolOutput(content="\n".join(lines), metadata=payload)


def notice_for(child: Child) -> AgentNotice:
    run, state = child.run, child.state
    ref, stats = run.ref, run.stats
    values = {
        "task_id": ref.agent_id,
        "description": run.description,
        "agent_type": ref.agent_type,
        "status": state.status,
        "result": run.result_text,
        "error": state.error,
        "output_file": state.output_file,
        "tool_uses": stats.tool_use_count,
        "total_tokens": stats.usage.total,
        "duration_ms": run.duration_ms,
        "worktree_path": run.worktree_fields.get("worktreePath"),
        "worktree_branch": run.worktree_fields.get("worktreeBranch"),
    }
    return new_frozen(AgentNotice, values)  # once per finished child: no frozen __init__
