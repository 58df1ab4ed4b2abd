"""The live panel of running agents and tasks, and the screen of one agent.

``AgentsPanel`` is a table of the board's rows (``cli/progress.AgentBoard``: type, description,
foreground or background, elapsed, tool uses, tokens, last activity) and the session's shell
tasks; finished rows stay a while, dimmed by their status. Enter on a row opens
``AgentScreen``: that agent's transcript, live (its past events replayed, new ones appended),
where ``s`` stops it, ``m`` writes it a message (delivered at its next turn) and Esc goes back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.coordinate import Coordinate
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from subagents.agents.tasks import TaskState
from subagents.cli.progress import AgentRow, human_tokens
from subagents.events import AssistantEvent, Event, ToolResultsEvent
from subagents.tui.chat import ChatLog

FINISHED_SHOWN = 6
"""Finished agents and tasks kept in the panel (the newest)."""
COLUMNS = ("agent", "task", "where", "time", "tools", "tokens", "doing")
STATUS_STYLE = {"running": "bold green", "completed": "dim", "failed": "red", "killed": "yellow"}


@dataclass(frozen=True)
class PanelRow:
    key: str
    cells: tuple[str, ...]
    status: str


def agent_row(row: AgentRow, now: float) -> PanelRow:
    doing = row.activities[-1] if row.activities and row.running else row.status
    return PanelRow(
        key=row.agent_id,
        cells=(
            f"{row.agent_type} {row.agent_id[:9]}",
            row.description,
            "bg" if row.background else "fg",
            f"{row.elapsed_s(now):.0f}s",
            str(row.tool_uses),
            human_tokens(row.tokens),
            doing,
        ),
        status=row.status,
    )


def shell_row(task: TaskState, now: float) -> PanelRow:
    start = task.started_at or task.created_at
    elapsed = (task.ended_at or now) - start
    return PanelRow(
        key=task.id,
        cells=(
            f"shell {task.id[:9]}",
            task.description,
            "bg",
            f"{elapsed:.0f}s",
            "",
            "",
            task.status,
        ),
        status="running" if task.status == "running" else task.status,
    )


def panel_rows(agents: Iterable[AgentRow], shells: Iterable[TaskState]) -> list[PanelRow]:
    """Running rows first (in start order), then the newest finished ones."""
    wall, mono = time.time(), time.monotonic()
    rows = [agent_row(a, mono) for a in agents] + [shell_row(s, wall) for s in shells]
    running = [r for r in rows if r.status == "running"]
    finished = [r for r in rows if r.status != "running"][-FINISHED_SHOWN:]
    return running + finished


class AgentsPanel(DataTable[Text]):
    DEFAULT_CSS = """
    AgentsPanel { height: auto; max-height: 9; display: none; border-top: solid $accent; }
    AgentsPanel.-shown { display: block; }
    """

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = False
        self.add_columns(*COLUMNS)

    def show(self, rows: list[PanelRow]) -> None:
        self.set_class(bool(rows), "-shown")
        wanted = [r.key for r in rows]
        current = [str(k.value) for k in self.rows]
        if wanted != current:
            selected = self._selected_key()
            self.clear()
            for row in rows:
                self.add_row(*_styled(row), key=row.key)
            if selected in wanted:
                self.move_cursor(row=wanted.index(selected))
            return
        for row in rows:
            for column, value in zip(self.columns, _styled(row), strict=True):
                self.update_cell(row.key, column, value, update_width=True)

    def _selected_key(self) -> str | None:
        if not self.rows or self.cursor_row >= len(self.rows):
            return None
        return str(self.coordinate_to_cell_key(Coordinate(self.cursor_row, 0)).row_key.value)


def _styled(row: PanelRow) -> list[Text]:
    style = STATUS_STYLE.get(row.status, "")
    return [Text(cell[:48], style=style if i in (0, 6) else "") for i, cell in enumerate(row.cells)]


class AgentScreen(Screen[None]):
    """One agent, live: its transcript, stop, message."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "back"),
        Binding("s", "stop", "stop it"),
        Binding("m", "message", "message it"),
    ]
    DEFAULT_CSS = """
    AgentScreen #agent-title { height: 1; background: $accent; color: $text; padding: 0 1; }
    AgentScreen #agent-message { display: none; }
    AgentScreen.-writing #agent-message { display: block; }
    """

    def __init__(
        self,
        agent_id: str,
        title: str,
        history: list[Event],
        *,
        stop: Callable[[str], object],
        message: Callable[[str, str], str],
    ) -> None:
        super().__init__()
        self.agent_id = agent_id
        self.title_text = title
        self.history = history
        self._stop = stop
        self._message = message

    def compose(self) -> ComposeResult:
        yield Static(self.title_text, id="agent-title", markup=False)
        yield ChatLog(id="agent-log")
        yield Input(
            placeholder="A message for this agent (Enter sends, Esc cancels)", id="agent-message"
        )
        yield Footer()

    def on_mount(self) -> None:
        for event in self.history:
            self.show_event(event)

    def show_event(self, event: Event) -> None:
        log = self.query_one("#agent-log", ChatLog)
        if isinstance(event, AssistantEvent):
            log.assistant(event.message)
        elif isinstance(event, ToolResultsEvent):
            log.tool_results(event.message)

    def note(self, text: str) -> None:
        self.query_one("#agent-log", ChatLog).notice(text)

    def action_stop(self) -> None:
        self._stop(self.agent_id)

    def action_message(self) -> None:
        self.set_class(True, "-writing")
        # Focusable once the class has shown it (it is not displayed until styles refresh).
        self.call_after_refresh(self.query_one("#agent-message", Input).focus)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        event.input.value = ""
        self.set_class(False, "-writing")
        if text:
            self.note(self._message(self.agent_id, text))
