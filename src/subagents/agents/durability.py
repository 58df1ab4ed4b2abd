"""Durable records of child runs: what a child's sidecar holds, built from its runtime state.

The writing itself — in order, off the loop, grouped per event-loop iteration, through whatever
the store offers — is ``store.durable.DurableRecords``; this module says *what* is written for a
child (SPEC §8-§9):

* at start (``started``) — a ``running`` sidecar with the owner's process identity, the lineage
  and the frozen config snapshot (model, permission mode, tools, system prompt, max turns,
  isolation), so a resume never re-reads a definition and a crash leaves a record to reconcile;
* while running — ``lastActiveAt`` (``DurableRecords.activity``, at most once per 10 s);
* on auto-background (``backgrounded``) — ``isBackground`` and the output file;
* at the end (``finished``) — one write with status, result, stats and worktree outcome,
  *before* the parent's notification is queued.

The parent's acknowledgement of a notification is its own transcript: a resumed session delivers
the notification of every finished background child of that session that its transcript does not
already contain, so nothing is lost and nothing is delivered twice, across restarts included.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TypeVar

from subagents.agents.agent_run import AgentJob, AgentRun
from subagents.agents.tasks import TaskState
from subagents.frozen import new_frozen
from subagents.store.durable import DurableRecords, Written
from subagents.store.process_identity import ProcessIdentity
from subagents.store.record_encoding import RunningTemplate
from subagents.store.records import (
    NO_RESULT,
    NO_STATS,
    SCHEMA_VERSION,
    ConfigSnapshot,
    Lineage,
    RunResult,
    RunStats,
    SidecarRecord,
    TokenUsage,
    WorktreeInfo,
)

if TYPE_CHECKING:
    from subagents.worktrees.git import Worktree


def started(records: DurableRecords, job: AgentJob, state: TaskState) -> None:
    run = job.frame.run
    ref = run.ref
    if job.worktree is None:
        config, template = records.start_shape(
            _snapshot_parts(job),
            lambda: config_snapshot(job),
            ref.agent_type,
            ref.parent_agent_id,
            run.is_background,
        )
        if template is not None:
            records.start_from(template, from_template(template, job, state))
            return
    else:
        config = records.config_from(_snapshot_parts(job), lambda: config_snapshot(job))
    record = build_record(
        job,
        state,
        session_id=records.session_id,
        project_path=records.project_path,
        identity=records.identity,
        config=config,
    )
    records.started(record)


def from_template(template: RunningTemplate, job: AgentJob, state: TaskState) -> dict[str, Any]:
    """``build_record``'s values, from the fields siblings share (``template.values``, copied)
    and the child's own: one dict copy and nine stores instead of a 26-key dict built, and the
    bytes from the template's pre-encoded runs (``RunningTemplate.encode``). The test
    (``tests/test_running_template.py``) compares record and bytes with ``build_record``'s."""
    run = job.frame.run
    agent_id = run.ref.agent_id
    transcript = job.transcript
    now = time.time()
    values = template.values.copy()  # every field, in field order: the record's own dict
    values["agent_id"] = agent_id
    values["description"] = run.description
    values["prompt"] = run.prompt
    values["tool_use_id"] = run.tool_use_id
    values["lineage"] = _frozen(
        Lineage,
        {
            "root_agent_id": run.root_agent_id or agent_id,
            "resumed_from": run.resumed_from,
            "resume_depth": run.resume_depth,
        },
    )
    values["created_at"] = values["last_active_at"] = now
    values["output_path"] = state.output_file
    values["transcript_path"] = transcript or None
    return values


def _snapshot_parts(job: AgentJob) -> tuple[object, ...]:
    """Everything ``config_snapshot`` reads, as the objects themselves: children of one type
    share their definition, tool list, prompt and budget objects (``AgentRuntime.child_toolset``,
    ``child_prompt``, the shared unlimited ``Budget``), so they share one snapshot. The tool
    list is never changed in place; its length rides along all the same."""
    frame = job.frame
    tools = frame.tools
    return (
        frame.definition,
        tools,
        len(tools),
        frame.system,
        job.budget,
        frame.run.model,
        frame.permission_mode,
        frame.thinking,
        job.memory_only,
    )


def backgrounded(records: DurableRecords, agent_id: str, output_path: str | None) -> None:
    records.change(agent_id, is_background=True, output_path=output_path)


def finished(records: DurableRecords, run: AgentRun, state: TaskState) -> Written:
    """The terminal write; await it before the notification is queued."""
    result = _frozen(
        RunResult, {"text": run.result_text, "reason": run.reason, "error": state.error}
    )
    stats = run_stats(run)
    outcome = run.worktree_outcome
    if outcome is None or not outcome.get("path"):
        # (positional: the changes a terminal write of a child without a worktree makes)
        return records.terminal(run.agent_id, state.status, result, stats, run.is_background, True)
    kept = bool(outcome.get("kept"))
    return records.finished(
        run.agent_id,
        status=state.status,
        result=result,
        stats=stats,
        notified=run.is_background,
        resumable=True,
        worktree=WorktreeInfo(
            path=str(outcome["path"]),
            branch=str(outcome.get("branch") or ""),
            outcome="kept" if kept else "removed",
        ),
    )


def build_record(
    job: AgentJob,
    state: TaskState,
    *,
    session_id: str,
    project_path: str,
    identity: ProcessIdentity,
    config: ConfigSnapshot | None = None,
) -> SidecarRecord:
    """The child's first record; ``config`` is ``config_snapshot(job)`` unless given."""
    run = job.frame.run
    ref = run.ref  # (its fields once: the run's properties are each a Python call)
    now = time.time()
    values = {  # every field (the defaults of a running record too): see ``frozen.new_frozen``
        "schema_version": SCHEMA_VERSION,
        "agent_id": ref.agent_id,
        "agent_type": ref.agent_type,
        "description": run.description,
        "prompt": run.prompt,
        "session_id": session_id,
        "project_path": project_path,
        "parent_agent_id": ref.parent_agent_id,
        "is_background": run.is_background,
        "tool_use_id": run.tool_use_id,
        "lineage": new_frozen(
            Lineage,
            {
                "root_agent_id": run.root_agent_id or ref.agent_id,
                "resumed_from": run.resumed_from,
                "resume_depth": run.resume_depth,
            },
        ),
        "config": config_snapshot(job) if config is None else config,
        "created_at": now,
        "last_active_at": now,
        "process": identity,
        "output_path": state.output_file,
        "transcript_path": job.transcript or None,
        "worktree": None if job.worktree is None else _worktree_record(job.worktree),
        "status": "running",
        "ended_at": None,
        "result": NO_RESULT,
        "stats": NO_STATS,
        "notified": False,
        "stop_requested": False,
        "restart_recovery": None,
        "resumable": False,
    }
    return new_frozen(SidecarRecord, values)  # (``SidecarRecord(**values)``, ~40 k cheaper)


def config_snapshot(job: AgentJob) -> ConfigSnapshot:
    """What a resume runs with: model, mode, tools, prompt, budget, definition (frozen)."""
    run, frame, budget = job.run, job.frame, job.budget
    definition = frame.definition
    return ConfigSnapshot(
        model=run.model,
        permission_mode=frame.permission_mode,
        tools=tuple(tool.name for tool in job.tools),
        system_prompt=job.system,
        max_turns=budget.max_turns,
        max_tokens=budget.max_tokens,
        max_wall_ms=budget.max_wall_ms,
        max_cost_usd=budget.max_cost_usd,
        isolation=definition.isolation if definition is not None else None,
        definition_source=definition.source if definition is not None else "runtime",
        definition_path=definition.path if definition is not None else None,
        thinking=job.thinking,
        memory=definition.memory if definition is not None else None,
        memory_only_tools=tuple(sorted(job.memory_only)),
    )


def _worktree_record(info: Worktree) -> WorktreeInfo:
    return WorktreeInfo(path=str(info.path), branch=info.branch or "", outcome="active")


def run_stats(run: AgentRun) -> RunStats:
    """The run's counters, frozen (every field given, in field order, so each dict becomes the
    value's own: ``_frozen``)."""
    stats = run.stats
    usage = stats.usage
    tokens = {  # the same four counters, frozen
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
    }
    values = {
        "num_turns": stats.num_turns,
        "total_tool_use_count": stats.tool_use_count,
        "total_tokens": usage.total,
        "usage": _frozen(TokenUsage, tokens),
        "total_duration_ms": run.duration_ms,
        "cost_usd": stats.cost_usd,
    }
    return _frozen(RunStats, values)


_T = TypeVar("_T")
_new = object.__new__
_set = object.__setattr__


def _frozen(cls: type[_T], values: dict[str, Any]) -> _T:
    """``cls(**values)`` for a frozen dataclass of this module's records, ``values`` a literal
    of the caller's naming every field in field order: ``frozen.new_frozen``'s every-field path
    without its look-up and check of the names (6.3 k → 3.6 k instructions an object, four per
    child). ``tests/test_background.py::test_a_childs_records_are_the_values_their_init_makes``
    compares each call site's value with ``cls(**values)``, field order included."""
    made = _new(cls)
    _set(made, "__dict__", values)
    return made
