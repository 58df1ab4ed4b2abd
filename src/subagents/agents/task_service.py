"""``AgentTasks``: the task service behind TaskOutput and TaskStop (``tools.base.TaskService``).

Any task of the session — a child agent, a background shell — by its id or by the name given to
an Agent call: ``output`` returns its full text (a child's result from the registry, a shell's
output file), waiting for it to end when asked (``wait_terminal``, for any task type); ``stop``
kills it through the registry (``registry.kill``: the kill of its type) and says whether it had
already ended. A run of another session or project is refused as such (SPEC §9), never acted on.
Neither checks that the caller owns the task: any agent of the session can read or stop any task
of the session.
"""

from __future__ import annotations

import asyncio

from subagents.agents.children import Children
from subagents.agents.results import task_output
from subagents.agents.tasks import TaskRegistry, TaskState, UnknownTaskError
from subagents.store.records import is_visible
from subagents.tools.base import ToolError, ToolOutput


class AgentTasks:
    """The session's tasks, as TaskOutput and TaskStop reach them."""

    def __init__(self, children: Children, registry: TaskRegistry) -> None:
        self.children = children
        self.registry = registry
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        registry.on_terminal(self._wake_waiters)

    def resolve(self, target: str) -> str:
        """A task id from an id or an agent name."""
        task_id = self.children.names.get(target, target)
        if self.registry.find(task_id) is None:
            self._refuse_foreign(task_id)
            raise ToolError(f"No task found with id or name {target!r}")
        return task_id

    def _refuse_foreign(self, task_id: str) -> None:
        """SPEC §9: a run of another session or project is refused as such, never acted on."""
        records = self.children.records
        if records is None:
            return
        try:
            record = records.store.get(task_id)
        except Exception:  # not a valid id, unreadable record: "not found" says enough
            return
        if record is not None and not is_visible(
            record, session_id=records.session_id, project_path=records.project_path
        ):
            raise ToolError(
                f"Task {task_id} belongs to another session or project; it cannot be queried "
                "or stopped from here (runs are visible only to their own session and project)"
            )

    async def output(self, target: str, *, block: bool, timeout_s: float) -> ToolOutput:
        task_id = self.resolve(target)
        state = self.registry.get(task_id)
        if block and not state.terminal:
            await self.wait_terminal(task_id, timeout_s)
        return task_output(state, _full_text(state))

    async def wait_terminal(self, task_id: str, timeout_s: float) -> bool:
        """Wait until the task is terminal (any type); False on timeout."""
        if self.registry.get(task_id).terminal:
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(task_id, []).append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout_s)
        except TimeoutError:
            return False
        finally:
            waiters = self._waiters.get(task_id, [])
            if waiter in waiters:
                waiters.remove(waiter)
        return True

    def _wake_waiters(self, state: TaskState) -> None:
        for waiter in self._waiters.pop(state.id, []):
            if not waiter.done():
                waiter.set_result(None)

    async def stop(self, target: str) -> ToolOutput:
        task_id = self.resolve(target)
        try:
            stopped = await self.registry.kill(task_id)
        except UnknownTaskError as exc:
            raise ToolError(str(exc)) from exc
        state = self.registry.get(task_id)
        if not stopped:
            return ToolOutput(content=f"Task {task_id} had already ended ({state.status}).")
        return ToolOutput(
            content=f"Task {task_id} ({state.description}) stopped.",
            metadata={"task_id": task_id, "status": state.status},
        )


def _full_text(state: TaskState) -> str:
    if state.type == "local_agent":
        return state.result or ""
    path = state.output_path
    if path is None or not path.exists():
        return ""
    return path.read_text(encoding="utf-8", errors="replace")
