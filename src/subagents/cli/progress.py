"""What every agent of a session is doing right now, folded from the session's events.

``AgentBoard`` keeps one ``AgentRow`` per child agent — type, description, placement, status,
elapsed time, tool uses, tokens and the last five activities (SPEC §4, §15) — from the events
every agent emits: ``agent_started``, each ``assistant`` message (its usage and tool calls),
``agent_progress``, the parent's tool result for a foreground child (or its move to the
background), and the ``task_notification`` of a background one. The interactive panel
(``tui/panel.py``) shows the rows; ``ProgressPrinter`` is headless ``-p``'s stderr view of them.

``ProgressPrinter`` writes only when a row *changes* — a tool call, new tokens, a new activity,
an end — never once a second per child. Foreground children show after ``show_after_s`` (2 s,
SPEC §4); with ``verbose`` background children too, from their start, and their ends. On a
terminal the rows are live: one line per running child, redrawn in place and wiped at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from subagents.events import (
    AssistantEvent,
    CompactionEvent,
    Event,
    InitEvent,
    NotificationEvent,
    ProgressEvent,
    ResultEvent,
    SystemEvent,
    ToolResultsEvent,
)
from subagents.loop.query import describe_call
from subagents.messages import tool_uses

MAX_ACTIVITIES = 5
ENDED = frozenset({"completed", "failed", "killed"})


@dataclass(kw_only=True)
class AgentRow:
    """One child agent as a person watching the session sees it."""

    agent_id: str
    agent_type: str
    parent_id: str | None = None
    description: str = ""
    background: bool = False
    status: str = "running"
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    tool_uses: int = 0
    tokens: int = 0
    activities: list[str] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self.status not in ENDED

    def elapsed_s(self, now: float | None = None) -> float:
        end = self.ended if self.ended is not None else (now or time.monotonic())
        return max(0.0, end - self.started)

    def note(self, activity: str) -> None:
        self.activities.append(activity)
        del self.activities[:-MAX_ACTIVITIES]

    def change_key(self) -> tuple[Any, ...]:
        """What a new progress line must differ in (elapsed time alone is no change)."""
        last = self.activities[-1] if self.activities else ""
        return (self.status, self.background, self.tool_uses, self.tokens, last)

    def line(self, now: float | None = None) -> str:
        """``[Explore a1b2c3d4] 3 tool uses · 1234 tokens · 4.1 s · Grep: TODO — probe a``"""
        where = " (background)" if self.background else ""
        state = "" if self.running else f" · {self.status}"
        last = f" · {self.activities[-1]}" if self.activities and self.running else ""
        what = f" — {self.description}" if self.description else ""
        return (
            f"[{self.agent_type} {self.agent_id}]{where} {self.tool_uses} tool uses · "
            f"{self.tokens} tokens · {self.elapsed_s(now):.1f} s{state}{last}{what}"
        )


def compaction_line(event: CompactionEvent) -> str:
    """``context compacted (auto, summary): 150.2k → 12.0k tokens``"""
    before, after = human_tokens(event.tokens_before), human_tokens(event.tokens_after)
    return f"context compacted ({event.trigger}, {event.method}): {before} → {after} tokens"


def human_tokens(count: int) -> str:
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k"
    return f"{count / 1_000_000:.1f}M"


@dataclass(kw_only=True)
class AgentBoard:
    """Every child agent of a session, in the order they started (see the module docstring)."""

    rows: dict[str, AgentRow] = field(default_factory=dict)
    main_id: str | None = None

    def running(self) -> list[AgentRow]:
        return [row for row in self.rows.values() if row.running]

    def apply(self, event: Event) -> AgentRow | None:
        """Fold ``event`` in; the row it changed, if any."""
        if isinstance(event, SystemEvent):
            return self._started(event) if event.subtype == "agent_started" else None
        if isinstance(event, AssistantEvent):
            return self._assistant(event)
        if isinstance(event, ProgressEvent) and event.subtype == "agent_progress":
            return self._progress(event)
        if isinstance(event, ToolResultsEvent):
            return self._results(event)
        if isinstance(event, NotificationEvent):
            return self._ended(event.task_id, event.status)
        if isinstance(event, ResultEvent):
            self._turn_ended()
        if isinstance(event, CompactionEvent):
            return self._compacted(event)
        return None

    def _compacted(self, event: CompactionEvent) -> AgentRow | None:
        row = self._row(event.agent.agent_id)
        if row is not None:
            row.note(compaction_line(event))
        return row

    def _started(self, event: SystemEvent) -> AgentRow:
        ref, data = event.agent, event.data
        row = AgentRow(
            agent_id=ref.agent_id,
            agent_type=ref.agent_type,
            parent_id=ref.parent_agent_id,
            description=str(data.get("description") or ""),
            background=bool(data.get("background")),
        )
        self.rows[ref.agent_id] = row
        return row

    def _row(self, agent_id: str) -> AgentRow | None:
        row = self.rows.get(agent_id)
        return row if row is not None and row.running else None

    def _assistant(self, event: AssistantEvent) -> AgentRow | None:
        row = self._row(event.agent.agent_id)
        if row is None:
            return None
        row.tokens += event.usage.total
        for call in tool_uses(event.message):
            row.tool_uses += 1
            row.note(describe_call(call["name"], call["input"]))
        return row

    def _progress(self, event: ProgressEvent) -> AgentRow | None:
        row, data = self._row(event.agent.agent_id), event.data
        if row is None:
            return None
        row.tool_uses = int(data.get("tool_use_count", row.tool_uses))
        row.tokens = int(data.get("total_tokens", row.tokens))
        activities = data.get("recent_activities")
        if isinstance(activities, list):
            row.activities = [str(a) for a in activities][-MAX_ACTIVITIES:]
        return row

    def _results(self, event: ToolResultsEvent) -> AgentRow | None:
        """The parent's results: a foreground child's end, or its move to the background."""
        changed = None
        for output in event.outputs:
            if not isinstance(output, dict) or "agentId" not in output:
                continue
            status = str(output.get("status", ""))
            if status == "async_launched":
                row = self._row(str(output["agentId"]))
                if row is not None:
                    row.background = True
                    changed = row
            elif status in ENDED:
                changed = self._ended(str(output["agentId"]), status) or changed
        return changed

    def _ended(self, agent_id: str, status: str) -> AgentRow | None:
        row = self._row(agent_id)
        if row is None:
            return None
        row.status = status if status in ENDED else "completed"
        row.ended = time.monotonic()
        return row

    def _turn_ended(self) -> None:
        """The main agent's turn is over: a foreground child still shown running was stopped
        with it (an interrupt) — foreground children never outlive their parent's call."""
        for row in self.running():
            if not row.background and row.parent_id == self.main_id:
                self._ended(row.agent_id, "killed")


@dataclass(kw_only=True)
class ProgressPrinter:
    """Headless progress on stderr (see the module docstring)."""

    stream: TextIO
    verbose: bool = False
    live: bool = False
    """Redraw one line per running child in place (stderr is a terminal)."""
    show_after_s: float = 2.0
    clock: Callable[[], float] = time.monotonic
    board: AgentBoard = field(default_factory=AgentBoard)
    _printed: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    _live_lines: int = 0

    def event(self, event: Event) -> None:
        if isinstance(event, InitEvent):
            self.board.main_id = event.agent.agent_id
        row = self.board.apply(event)
        if self.live:
            if row is not None or isinstance(event, ResultEvent):
                self._redraw()
            return
        rows = list(self.board.rows.values()) if isinstance(event, ResultEvent) else [row]
        for changed in rows:
            if changed is not None:
                self._print_if_changed(changed)

    def _print_if_changed(self, row: AgentRow) -> None:
        key = row.change_key()
        if self._shown(row) and self._printed.get(row.agent_id) != key:
            self._printed[row.agent_id] = key
            self.stream.write(row.line(self.clock()) + "\n")
            self.stream.flush()

    def _shown(self, row: AgentRow) -> bool:
        if row.background and not self.verbose:
            return False
        if row.agent_id in self._printed:
            return True  # once shown, its end is shown too
        return self.verbose or (row.running and row.elapsed_s(self.clock()) >= self.show_after_s)

    def _redraw(self) -> None:
        now = self.clock()
        rows = [r for r in self.board.running() if self._shown(r)]
        out = ["\x1b[1A\x1b[2K" * self._live_lines, "\r"]
        out.extend(f"{row.line(now)[:200]}\n" for row in rows)
        self._live_lines = len(rows)
        self.stream.write("".join(out))
        self.stream.flush()

    def finish(self) -> None:
        """Wipe the live lines (the final answer goes to stdout after this)."""
        if self.live and self._live_lines:
            self.stream.write("\x1b[1A\x1b[2K" * self._live_lines + "\r")
            self.stream.flush()
            self._live_lines = 0
