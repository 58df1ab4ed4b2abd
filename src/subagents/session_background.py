"""What a ``Session`` runs beside its main agent: background children (with their durable
records), background shells, and the task registry both report to; and how they end.

Built once per session (``background_parts``); ``BackgroundParts.shutdown`` kills what still
runs, drains every durable write and closes the writer and a store the session opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from subagents.agents.children import Children
from subagents.agents.executor import LOCAL
from subagents.agents.runtime import AgentRuntime
from subagents.agents.shells import BackgroundShellManager
from subagents.agents.tasks import TaskRegistry
from subagents.loop.inbox import Inbox
from subagents.session_options import SessionOptions
from subagents.state import ProjectState
from subagents.store.durable import DurableRecords
from subagents.store.protocol import Store
from subagents.store.select import Closable, open_store
from subagents.store.writer import DurableWriter


@dataclass(kw_only=True)
class BackgroundParts:
    """A session's background machinery: task registry, children, shells, durable writes."""

    registry: TaskRegistry
    children: Children
    shells: BackgroundShellManager
    writer: DurableWriter
    store: Store
    owns_store: bool
    """The session opened the store (``SessionOptions.store`` was not given): it closes it."""

    async def shutdown(self) -> None:
        """Kill the background agents and shells, then drain and close the durable writes
        (teammates and MCP servers end before: ``Session._shutdown``)."""
        await self.children.shutdown()
        await self.shells.shutdown()

    async def close_writes(self) -> None:
        await self.children.drain_writes()
        if self.children.records is not None:
            await self.children.records.drain()
            self.children.records.close()
        # Drained: the writer thread is idle, so closing it is a wake-up and a join, not a
        # wait on the disk; no executor thread is started for it.
        self.writer.close()
        if self.owns_store and isinstance(self.store, Closable):
            self.store.close()  # a database's connections


def background_parts(
    options: SessionOptions,
    runtime: AgentRuntime,
    *,
    state: ProjectState,
    inbox: Inbox,
    session_id: str,
    cwd: Path,
) -> BackgroundParts:
    registry = TaskRegistry()
    children = Children(
        runtime,
        registry=registry,
        tasks_dir=state.tasks_dir,
        root_inbox=inbox,
        executor=options.executor or LOCAL,
    )
    writer = DurableWriter()
    store: Store = options.store or open_store(state)
    if options.sidecars:
        children.records = DurableRecords(
            store=store, writer=writer, session_id=session_id, project_path=str(cwd)
        )
    shells = BackgroundShellManager(registry, state.tasks_dir, children.notify)
    return BackgroundParts(
        registry=registry,
        children=children,
        shells=shells,
        writer=writer,
        store=store,
        owns_store=options.store is None,
    )
