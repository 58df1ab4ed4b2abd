"""``TodoWrite``: each agent's own to-do list, shown to the user as its progress.

The list lives on a ``TodoBoard`` shared by the session's agents and keyed by agent id, so every
agent has its own list and a child's list never mixes with its parent's. Each call replaces the
agent's whole list (the model rewrites it, as in Claude Code), emits a ``todos`` progress event
(the stream shows it; ``--verbose`` prints one line) and returns the list as the model should now
see it. The session clears a child's entry when the child ends, on every path (SPEC §5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from subagents.events import ProgressEvent
from subagents.tools import descriptions
from subagents.tools.base import (
    CallInfo,
    LazyInput,
    Tool,
    ToolContext,
    ToolOutput,
)

if TYPE_CHECKING:
    from subagents.tools.inputs.todo import TodoItem, TodoWriteInput

_MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


@dataclass(kw_only=True)
class TodoBoard:
    """Every agent's current list, by agent id."""

    lists: dict[str, list[TodoItem]] = field(default_factory=dict)

    def set(self, agent_id: str, todos: list[TodoItem]) -> None:
        if todos:
            self.lists[agent_id] = list(todos)
        else:
            self.lists.pop(agent_id, None)

    def get(self, agent_id: str) -> list[TodoItem]:
        return list(self.lists.get(agent_id, ()))

    def clear(self, agent_id: str) -> None:
        self.lists.pop(agent_id, None)


def render(todos: list[TodoItem]) -> str:
    return "\n".join(f"{_MARK[t.status]} {t.content}" for t in todos) or "(empty)"


def headline(todos: list[TodoItem]) -> str:
    """``2/5 done · now: Running tests`` (what a progress line shows)."""
    done = sum(1 for t in todos if t.status == "completed")
    current = next((t for t in todos if t.status == "in_progress"), None)
    now = f" · now: {current.activeForm or current.content}" if current is not None else ""
    return f"{done}/{len(todos)} done{now}"


class TodoWriteTool(Tool["TodoWriteInput"]):
    name = "TodoWrite"
    description = descriptions.TODO_WRITE
    input_model = LazyInput["TodoWriteInput"]("subagents.tools.inputs.todo", "TodoWriteInput")
    requires_permission = False

    def __init__(self, board: TodoBoard | None = None) -> None:
        self.board = board if board is not None else TodoBoard()

    def is_read_only(self, args: TodoWriteInput) -> bool:
        return True  # it changes nothing outside the runtime: allowed in plan mode too

    async def call(self, args: TodoWriteInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        todos = args.todos
        self.board.set(ctx.agent.agent_id, todos)
        items = [t.model_dump(exclude_none=True) for t in todos]
        ctx.emit(
            ProgressEvent(
                agent=ctx.agent,
                subtype="todos",
                data={"todos": items, "summary": headline(todos)},
                tool_use_id=info.tool_use_id,
            )
        )
        notes = []
        active = sum(1 for t in todos if t.status == "in_progress")
        if active > 1:
            notes.append(f"Note: {active} items are in_progress; keep exactly one.")
        if todos and active == 0 and any(t.status == "pending" for t in todos):
            notes.append("Note: no item is in_progress; mark the one you work on next.")
        text = f"Todo list updated ({headline(todos)}):\n{render(todos)}"
        if notes:
            text += "\n" + "\n".join(notes)
        return ToolOutput(content=text, metadata={"todos": items})
