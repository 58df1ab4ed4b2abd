"""A member's side of its mailbox: a watcher that feeds the agent's ``Inbox``, and the
teammate's inbox that goes idle instead of ending.

``MailboxWatcher`` is a named asyncio task that looks at the mailbox file's size every
``interval_s`` (the runtime polls a file; nothing polls the model) and hands each new message to
a callback, once. ``TeamInbox`` is a teammate's inbox: after a final answer the loop asks it for
more input, and instead of ending it goes idle (``on_idle``: the TeammateIdle hook, then the idle
notification to the lead) and waits — unbounded — for the next message, until the teammate is
shutting down.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from subagents.agents.teams.files import TeamError
from subagents.agents.teams.mailbox import Mailbox
from subagents.loop.inbox import Inbox, InboxItem

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.1


class MailboxWatcher:
    """Watch one mailbox; ``on_message(line_number, message)`` once per new line."""

    def __init__(
        self,
        mailbox: Mailbox,
        on_message: Callable[[int, dict[str, Any]], None],
        *,
        interval_s: float = POLL_INTERVAL_S,
        on_tick: Callable[[], None] | None = None,
    ) -> None:
        self.mailbox = mailbox
        self.on_message = on_message
        self.on_tick = on_tick
        self.interval_s = interval_s
        self._next_line = mailbox.cursor()
        self._size = -1
        self._failed = ""
        self.task: asyncio.Task[None] | None = None

    def start(self, name: str) -> None:
        self.task = asyncio.get_running_loop().create_task(self._watch(), name=name)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
            self.task = None

    def check(self) -> None:
        """Read what arrived since the last check (also called directly, e.g. before idling).
        A mailbox that cannot be read (not a regular file, gone) is logged once, not raised:
        it must not end the member's loop."""
        size = self.mailbox.size()
        if size == self._size:
            return
        try:
            found = self.mailbox.unread()
        except (TeamError, OSError) as exc:
            if str(exc) != self._failed:
                self._failed = str(exc)
                log.warning("mailbox %s: %s", self.mailbox.path, exc)
            return
        self._failed = ""
        # Fully read: wait for the size to change; a read cut at its cap goes on next time.
        self._size = size if self.mailbox.scanned >= size else -1
        for number, message in found:
            if number >= self._next_line:
                self._next_line = number + 1
                self.on_message(number, message)

    async def _watch(self) -> None:
        while True:
            try:
                self.check()
                if self.on_tick is not None:
                    self.on_tick()
            except Exception:  # a failing callback must not end the watcher
                log.exception("mailbox %s: check failed", self.mailbox.path)
            await asyncio.sleep(self.interval_s)


class TeamInbox(Inbox):
    """A teammate's inbox: idle after each turn, woken by the next message."""

    def __init__(self, on_idle: Callable[[], Awaitable[str | None]]) -> None:
        super().__init__()
        self.on_idle = on_idle
        self.shutting_down = False
        self.approved = False
        """The teammate approved a shutdown request (a clean end)."""
        self.before_idle: Callable[[], None] | None = None
        """Reads the mailbox once more, so a message that just arrived is not idled over."""

    def shut_down(self, *, approved: bool = False) -> None:
        """End after the current turn (an approved shutdown, the lead gone, SIGTERM)."""
        self.approved = self.approved or approved
        self.shutting_down = True
        self.wake()

    async def wait_for_delivery(self) -> bool:
        if self.before_idle is not None:
            self.before_idle()
        if self.pending():
            return True
        if self.shutting_down:
            return False
        feedback = await self.on_idle()
        if feedback:
            self.put(InboxItem(id=f"idle-feedback:{uuid.uuid4()}", text=feedback))
            return True
        self.expecting = lambda: not self.shutting_down
        self.wait_deadline = None
        return await super().wait_for_delivery()
