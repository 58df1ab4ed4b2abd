"""The conversation behind the interactive UI: one held ``Session``, turn after turn.

``Conversation.run`` is the one task that starts turns. A prompt typed while a turn runs waits
in ``queued`` and runs next; when nothing is typed and a background child's notification
arrives (``inbox.on_put``), it runs a turn on it (``Session.deliver_pending``), as Claude Code
does. ``interrupt`` ends the running turn only (ESC); ``replace`` closes the session and opens
another (``/clear`` a new one, ``/resume`` an earlier one), ``close`` ends it for good (quit):
background children are stopped and every record and transcript is on disk when it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from subagents.agents.notifications import escape_runtime_tags
from subagents.events import Event, EventSink
from subagents.loop.compaction import CompactionResult
from subagents.loop.inbox import InboxItem
from subagents.session import Session, SessionResult

SessionFactory = Callable[[str | None], Session]
"""Makes the session: a new one (None) or the continuation of an earlier session id."""


@dataclass(kw_only=True)
class Conversation:
    factory: SessionFactory
    on_event: EventSink
    on_state: Callable[[], None] = lambda: None
    """Told when a turn starts or ends and when the session is replaced."""
    on_error: Callable[[str], None] = lambda _text: None
    """A turn that could not run (a model that cannot be reached, a bad resume)."""
    session: Session | None = None
    queued: list[str] = field(default_factory=list)
    busy: bool = False
    last: SessionResult | None = None
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _idle: asyncio.Event = field(default_factory=asyncio.Event)
    _closed: bool = False
    _exclusive: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held by a turn and by ``/compact``: a compaction never runs beside a turn."""

    def open(self, resume: str | None = None) -> Session:
        self._idle.set()
        session = self.factory(resume)
        session.hold(self._event)
        session.inbox.on_put = self._wake.set
        self.session = session
        self.on_state()
        return session

    def _event(self, event: Event) -> None:
        self.on_event(event)

    def submit(self, prompt: str) -> None:
        self.queued.append(prompt)
        self._wake.set()
        self.on_state()

    def interrupt(self) -> bool:
        """ESC: end the running turn (foreground children with it); False when idle."""
        return self.session is not None and self.session.interrupt("interrupted by the user")

    async def run(self) -> None:
        while not self._closed:
            self._wake.clear()
            session = self.session
            if session is not None and self.queued:
                await self._turn(session, self.queued.pop(0))
            elif session is not None and session.has_pending_input():
                await self._turn(session, None)
            else:
                await self._wake.wait()

    async def _turn(self, session: Session, prompt: str | None) -> None:
        async with self._exclusive:
            await self._run_turn(session, prompt)

    async def _run_turn(self, session: Session, prompt: str | None) -> None:
        self.busy = True
        self._idle.clear()
        self.on_state()
        try:
            if prompt is None:
                self.last = await session.deliver_pending()
            else:
                self.last = await session.run(prompt)
        except (ValueError, OSError, RuntimeError) as exc:
            self.on_error(str(exc))
        except Exception as exc:  # one failed turn must not end the session
            self.on_error(f"the turn failed: {type(exc).__name__}: {exc}")
        finally:
            self.busy = False
            self._idle.set()
            self.on_state()

    async def compact(self, instructions: str | None) -> CompactionResult:
        """``/compact``: summarise the held session's history between turns (a turn that is
        running finishes first; prompts typed meanwhile wait for the compaction)."""
        session = self.session
        if session is None:
            raise ValueError("no session is open")
        async with self._exclusive:
            self.busy = True
            self._idle.clear()
            self.on_state()
            try:
                return await session.compact(instructions)
            finally:
                self.busy = False
                self._idle.set()
                self.on_state()

    def message_agent(self, agent_id: str, text: str) -> str:
        """A person's message to a running child, read at its next turn (as a
        ``<teammate-message from="user">``, runtime tags in it defused)."""
        session = self.session
        state = session.registry.find(agent_id) if session is not None else None
        inbox = session.background.inboxes.get(agent_id) if session is not None else None
        if state is None or inbox is None or state.terminal:
            return "This agent is not running: a message cannot reach it."
        body, _ = escape_runtime_tags(text)
        message = f'<teammate-message from="user">\n{body}\n</teammate-message>'
        inbox.put(InboxItem(id=f"message:{uuid.uuid4()}", text=message))
        return "Message delivered: the agent reads it at its next turn."

    async def stop_task(self, task_id: str) -> str:
        session = self.session
        if session is None or session.registry.find(task_id) is None:
            return f"No task {task_id} in this session."
        stopped = await session.registry.kill(task_id)
        status = session.registry.get(task_id).status
        return f"Stopped {task_id}." if stopped else f"{task_id} had already ended ({status})."

    async def replace(self, resume: str | None) -> Session:
        """Close the current session (its children stop) and open another."""
        self.queued.clear()
        await self._settle()
        old, self.session = self.session, None
        self.last = None  # the result of the session being replaced
        if old is not None:
            await old.close()
        return self.open(resume)

    async def _settle(self, wait_s: float = 10.0) -> None:
        """Interrupt a running turn and wait (bounded) until it has ended."""
        self.interrupt()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                await self._idle.wait()

    async def close(self) -> None:
        self._closed = True
        self._wake.set()
        await self._settle()
        if self.session is not None:
            await self.session.close()
