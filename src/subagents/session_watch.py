"""Two things a ``Session`` watches for its user: its warnings and its spending.

``WarningLog`` keeps every warning of the session once, in order, and shows each as a
``system``/``warning`` event once the run has started (earlier ones right after ``init``).
``BudgetWatch`` sums the cost of every model call of every agent (it sees each ``assistant``
event) and, past ``max_budget_usd``, stops the turn and kills the running background agents.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from subagents.abort import AbortSignal
from subagents.agents.tasks import TaskRegistry
from subagents.events import AgentRef, AssistantEvent, Event, EventSink, SystemEvent
from subagents.models.pricing import cost_usd
from subagents.session_turns import BUDGET_REASON


@dataclass(kw_only=True)
class WarningLog:
    """The session's warnings (settings, hooks, definitions, permission rules)."""

    ref: AgentRef
    messages: list[str] = field(default_factory=list)
    on_warning: Callable[[str], None] | None = None
    """Called with each warning's text when it is shown (the CLI's ``json`` output)."""
    live: bool = False
    """The run has started: a new warning is shown at once."""
    _shown: int = 0

    def add(self, message: str, emit: EventSink) -> None:
        if message in self.messages:
            return  # the same warning (a hook failing on every call) is shown once
        self.messages.append(message)
        if self.live:
            self.show(emit)

    def show(self, emit: EventSink) -> None:
        """Show what has not been shown yet; from now on each warning is shown at once."""
        self.live = True
        while self._shown < len(self.messages):
            message = self.messages[self._shown]
            self._shown += 1
            emit(SystemEvent(agent=self.ref, subtype="warning", data={"message": message}))
            if self.on_warning is not None:
                self.on_warning(message)


@dataclass(kw_only=True)
class BudgetWatch:
    """``max_budget_usd`` over every agent of the session."""

    limit: float
    registry: TaskRegistry
    turn_abort: Callable[[], AbortSignal | None]
    """The running turn's signal (None between turns)."""
    spent_usd: float = 0.0
    _kills: set[asyncio.Task[bool]] = field(default_factory=set)

    def wrap(self, sink: EventSink) -> EventSink:
        def watch(event: Event) -> None:
            if isinstance(event, AssistantEvent):
                self.spent_usd += cost_usd(event.model, event.usage)
                if self.spent_usd >= self.limit:
                    self._stop()
            sink(event)

        return watch

    def _stop(self) -> None:
        turn = self.turn_abort()
        if turn is not None and not turn.aborted:
            turn.abort(BUDGET_REASON)
        for state in list(self.registry.running()):
            if state.type == "local_agent":
                task = asyncio.get_running_loop().create_task(self.registry.kill(state.id))
                self._kills.add(task)
                task.add_done_callback(self._kills.discard)
