"""``create_subagent_context``: what a child inherits from its parent, as a whitelist.

Every field of the child's ``ToolContext`` is decided here, one by one, so a field added later is
isolated by default (the failure mode is "the child lacks a capability", never "the child mutates
its parent's state"):

* cloned  — the file-read cache (the child's reads do not touch the parent's cache), the env;
* fresh   — the process tracker: the child's shells are its own and die in its cleanup;
* linked  — the abort signal: a sync child's signal is a child of the parent's (parent abort stops
            the child, not the reverse); a background child gets an unlinked one from the caller;
* shared  — ``services`` (the session's agent runtime and task registry, so anything a child starts
            is registered at the root and never orphaned) and the event sink (events carry the
            child's own ``AgentRef``, so a UI can tell who is speaking), and the observer
            (telemetry: the child's spans are told apart by the same identity);
* replaced — permissions, read rules and hooks: the child's own, derived by the caller, never the
            parent's objects (a child must not widen what its parent may do).
There are no UI callbacks or parent state setters in a ``ToolContext`` to cut: a child can only
emit events, and those are tagged with its identity.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeGuard

from subagents.abort import AbortSignal
from subagents.agents.orphan_processes import transcript_group_recorder
from subagents.events import AgentRef
from subagents.processes import ProcessTracker
from subagents.tools.base import (
    CanUseTool,
    LoopHooks,
    ReadGuard,
    RunningAgent,
    ToolContext,
    ToolServices,
    new_context,
)


def create_subagent_context(
    parent: ToolContext,
    *,
    agent: AgentRef,
    abort: AbortSignal,
    owner: RunningAgent,
    cwd: Path | None = None,
    roots: tuple[Path, ...] | None = None,
    can_use_tool: CanUseTool | None = None,
    hooks: LoopHooks | None = None,
    transcript: str | Path | None = "ask",
) -> ToolContext:
    """Derive a child's context from its parent's (see the module docstring for each field).

    ``transcript`` is the child's transcript path (or its text) when the caller knows it already
    (None: it has none); by default (``"ask"``) it is asked of ``services``."""
    child_cwd = cwd or parent.cwd
    return new_context(
        cwd=child_cwd,
        roots=roots if roots is not None else (parent.roots if cwd is None else (child_cwd,)),
        abort=abort,
        agent=agent,
        emit=parent.emit,
        processes=_child_tracker(parent.services, agent, transcript),
        read_files=dict(parent.read_files),
        can_use_tool=can_use_tool,
        # The child's own checker holds its rules (the parent's plus its own denials); a
        # wrapped check (a read-only agent's guard) keeps the parent's read rules.
        read_guard=can_use_tool if _is_read_guard(can_use_tool) else parent.read_guard,
        hooks=hooks,
        env=dict(parent.env),
        services=parent.services,
        owner=owner,
        observer=parent.observer,
    )


_READ_GUARD_TYPES: dict[type, bool] = {}


def _is_read_guard(check: object) -> TypeGuard[ReadGuard]:
    """``isinstance(check, ReadGuard)``, answered once per type: a protocol check walks the
    protocol's members on every call (~10 µs on Python 3.11), once per child here, and a
    method protocol's answer is the class's."""
    kind = type(check)
    known = _READ_GUARD_TYPES.get(kind)
    if known is None:
        known = _READ_GUARD_TYPES[kind] = isinstance(check, ReadGuard)
    return known


def _child_tracker(
    services: ToolServices | None, agent: AgentRef, transcript: str | Path | None
) -> ProcessTracker:
    """A fresh tracker that also records each group on disk (``agents.orphan_processes``), so crash
    recovery can kill the child's shells after the runtime itself was killed."""
    if transcript == "ask":  # (a transcript's own text ends in ``.jsonl``)
        transcript = services.transcript_for(agent.agent_id) if services is not None else None
    if transcript is None:
        return ProcessTracker()
    return ProcessTracker(transcript_group_recorder(transcript))  # (by position: a class call)
