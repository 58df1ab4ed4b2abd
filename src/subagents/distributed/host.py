"""Running a ``RemoteChild`` on a node: a host session of its own, the child's loop, the reports.

A node has no session of the driver's, so it builds one (``Session`` with the child's model spec,
folder and permission mode; no sidecars — the driver keeps the child's durable record) and runs
the child in it as a background child: the same ``child_run.run_child`` (SubagentStart and
SubagentStop hooks, the denial breaker, its worktree settled), its tools resolved by name from
that session's tool set, its file tools on this node's view of the folder, its transcript at the
path the driver chose. One host session serves every child with the same (session, folder,
model, mode): they are siblings, as they would be in the driver.

``HostedChildren`` is what a ``ChildHost`` actor holds; ``run`` yields ``Progress`` after a turn
(at most one per ``PROGRESS_INTERVAL_S``) and one ``Ended``; ``stop`` aborts a hosted child
(its loop ends ``killed`` at its next boundary, as a local TaskStop does).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from subagents.abort import AbortSignal
from subagents.agents.agent_run import AgentFrame, AgentJob, AgentRun
from subagents.agents.child_run import run_child
from subagents.agents.orphan_processes import transcript_group_recorder
from subagents.distributed.remote import Ended, Progress, RemoteChild, progress_of
from subagents.events import AgentRef, Event
from subagents.loop.inbox import Inbox
from subagents.loop.query import Budget, LoopStats
from subagents.models.base import ToolSchema
from subagents.processes import ProcessTracker
from subagents.session import Session, SessionOptions
from subagents.tools.base import Tool, ToolContext

_HostKey = tuple[str, str, str, str]
PROGRESS_INTERVAL_S = 1.0
"""At most one ``Progress`` per child per interval (the driver's activity write is at most one
per second too, and a stall is minutes)."""


class HostedChildren:
    """The children one node runs (see the module docstring)."""

    def __init__(self) -> None:
        self._sessions: dict[_HostKey, tuple[Session, Toolset]] = {}
        self._aborts: dict[str, AbortSignal] = {}

    async def run(self, remote: RemoteChild) -> AsyncIterator[Progress | Ended]:
        session, available = self._session(remote)
        abort = AbortSignal()
        self._aborts[remote.agent_id] = abort
        reports: asyncio.Queue[Progress] = asyncio.Queue()
        job = child_job(
            session, remote, abort, available, on_turn=lambda s: reports.put_nowait(progress_of(s))
        )
        task = asyncio.get_running_loop().create_task(
            run_child(session.runtime, job), name=f"hosted:{remote.agent_id}"
        )
        sent = time.monotonic()
        try:
            while not task.done():
                getter = asyncio.ensure_future(reports.get())
                await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    continue
                latest = getter.result()
                # Every report is one Ray message (~1 ms of CPU on each side): at most one per
                # interval reaches the driver, the latest; the end carries the final counters.
                if time.monotonic() - sent >= PROGRESS_INTERVAL_S:
                    sent = time.monotonic()
                    yield latest
            outcome = task.result()
        finally:
            self._aborts.pop(remote.agent_id, None)
            session.background.inboxes.pop(remote.agent_id, None)
            if not task.done():  # the driver cancelled the call: the child ends with it
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        run = job.run
        yield Ended(
            status=run.status,
            reason=outcome.reason,
            error=run.error,
            result_text=run.result_text,
            duration_ms=run.duration_ms,
            progress=progress_of(run.stats),
            final_text=outcome.final_text,
            worktree_fields=dict(run.worktree_fields),
        )

    def stop(self, agent_id: str, reason: str) -> bool:
        """Abort a hosted child; False when it is not (or no longer) here."""
        abort = self._aborts.get(agent_id)
        if abort is None:
            return False
        abort.abort(reason)
        return True

    def running(self) -> list[str]:
        return list(self._aborts)

    def _session(self, remote: RemoteChild) -> tuple[Session, Toolset]:
        key = (remote.session_id, remote.cwd, remote.model_spec, remote.permission_mode)
        hosted = self._sessions.get(key)
        if hosted is None:
            session = Session(
                SessionOptions(
                    model=remote.model_spec,
                    cwd=Path(remote.cwd),
                    sidecars=False,
                    permission_mode=remote.permission_mode,
                )
            )
            hosted = self._sessions[key] = (session, toolset(session))
        return hosted


def child_job(
    session: Session,
    remote: RemoteChild,
    abort: AbortSignal,
    available: Toolset,
    *,
    on_turn: Callable[[LoopStats], None] | None = None,
) -> AgentJob:
    """The job of ``remote`` as a background child of the host ``session``."""
    ref = AgentRef(
        agent_id=remote.agent_id,
        agent_type=remote.agent_type,
        parent_agent_id=remote.parent_agent_id,
    )
    run = AgentRun(
        ref=ref,
        description=remote.description,
        prompt=remote.prompt,
        model=session.model.name,
        depth=remote.depth,
        is_background=True,
        tool_use_id=remote.tool_use_id,
    )
    session.runtime.register(run)
    tools, schemas = _tools(available, remote)
    checker = session.permissions.for_child(session.permissions.context, background=True)
    frame = AgentFrame(
        run=run,
        model=session.model,
        system=remote.system,
        tools=tools,
        tool_schemas=schemas,
        messages=list(remote.messages),
        thinking=remote.thinking,
        permission_mode=checker.context.mode,
        permissions=checker,
    )
    transcript = Path(remote.transcript) if remote.transcript else None
    hooks = session.runtime.hooks
    cwd = Path(remote.cwd)
    ctx = ToolContext(
        cwd=cwd,
        roots=(cwd,),
        abort=abort,
        agent=ref,
        emit=_discard,
        # Its shells' groups are recorded beside its transcript, so whoever reconciles the child
        # after this node dies (the driver, or a recovery) can end them.
        processes=(
            ProcessTracker(on_add=transcript_group_recorder(transcript))
            if transcript is not None
            else ProcessTracker()
        ),
        services=session.services,
        owner=frame,
        can_use_tool=checker,
        read_guard=checker,
        hooks=(
            hooks.for_agent(None, ref.agent_id, ref.agent_type, transcript_path=transcript)
            if hooks is not None
            else None
        ),
    )
    inbox = Inbox()
    session.background.inboxes[remote.agent_id] = inbox  # its own children report to it
    return AgentJob(
        frame=frame,
        caller=session.runtime.caller(session.model),
        ctx=ctx,
        budget=Budget(max_turns=remote.max_turns),
        inbox=inbox,
        transcript=remote.transcript or None,
        on_turn=on_turn,
        tool_concurrency=session.config.tool_concurrency,
        compaction=session.runtime.compaction_policy(session.model),
        task_text=remote.prompt,
    )


Toolset = dict[str, tuple[Tool[Any], ToolSchema]]
"""A host session's tools and their schemas by name, built once per session (a schema is a
pydantic JSON-schema render: one per child would be most of a short child's CPU on the node)."""


def toolset(session: Session) -> Toolset:
    return {tool.name: (tool, tool.schema()) for tool in session.main_tools()}


def _tools(available: Toolset, remote: RemoteChild) -> tuple[list[Tool[Any]], list[ToolSchema]]:
    """The child's tools by name from the host session's set; a name the node lacks (a
    ``@tool`` function only the driver has) is an error naming it."""
    missing = [name for name in remote.tool_names if name not in available]
    if missing:
        raise ValueError(
            f"agent {remote.agent_id}: tool(s) {missing} are not available on this node "
            "(only built-in tools run on Ray; see docs/distributed.md)"
        )
    chosen = [available[name] for name in remote.tool_names]
    return [tool for tool, _ in chosen], [schema for _, schema in chosen]


def _discard(event: Event) -> None:
    """Events of a hosted child stay on its node; the driver hears ``Progress``/``Ended``."""
