"""An agent's inbox: input that arrives while it works, delivered between turns.

Background completions and messages from other agents are ``put`` here from anywhere in the
process; the loop ``drain``s them at its next boundary (with a turn's tool results, or as a new user
message after a final answer), so they never land inside a running model output. Every item has a
stable id (a completion's id is derived from the child's id), and an id is delivered at most once.

An item with ``wakes=False`` (a reminder about other input) rides along: it is delivered with the
next drain but never by itself, so it cannot cost the agent a model call of its own — the
verification reminder is queued when a background child completes, a moment before that child's
notification (which waits for its durable terminal write), and must arrive with it.

After a final answer the loop asks ``wait_for_delivery``: when more input is still expected (the
headless main agent waits for its background children) it blocks, bounded, for the next item.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(kw_only=True, slots=True)
class InboxItem:
    """A message waiting for an agent's next turn."""

    id: str
    text: str
    on_delivered: Callable[[], None] | None = None
    wakes: bool = True
    """False: delivered only along with other input (``pending`` ignores it)."""


_NO_ITEMS: tuple[InboxItem, ...] = ()
_NO_IDS: frozenset[str] = frozenset()


class Inbox:
    """Pending input of one agent.

    Its queue and its set of ids are made at the first ``put`` (until then the shared empty
    ``_NO_ITEMS`` and ``_NO_IDS``), and it has slots: a swarm's thousand waiting children
    each held an empty deque, an empty set and an instance dict, three objects the garbage
    collector visits at every collection that reaches them, for inboxes most of which never
    receive an item."""

    __slots__ = ("_arrived", "_items", "_seen", "_waking", "expecting", "on_put", "wait_deadline")

    def __init__(self) -> None:
        self._items: deque[InboxItem] | tuple[InboxItem, ...] = _NO_ITEMS
        self._seen: set[str] | frozenset[str] = _NO_IDS
        self._waking = 0
        """Queued items that may wake the agent (``wakes``)."""
        self._arrived: asyncio.Event | None = None
        self.expecting: Callable[[], bool] | None = None
        """Says whether more input may still come (e.g. background children are running)."""
        self.wait_deadline: float | None = None
        """Monotonic time after which ``wait_for_delivery`` stops waiting."""
        self.on_put: Callable[[], None] | None = None
        """Told after an item is queued (a long-lived session wakes for it when idle)."""

    def put(self, item: InboxItem) -> bool:
        """Queue an item; False when an item with that id was already queued or delivered."""
        if item.id in self._seen:
            return False
        items, seen = self._items, self._seen
        if not isinstance(items, deque) or not isinstance(seen, set):  # the first item
            items, seen = self._items, self._seen = deque(), set()
        seen.add(item.id)
        items.append(item)
        if not item.wakes:
            return True
        self._waking += 1
        if self._arrived is not None:
            self._arrived.set()
        if self.on_put is not None:
            self.on_put()
        return True

    def pending(self) -> bool:
        """Input waiting that warrants a turn (riders alone do not)."""
        return self._waking > 0

    def queued(self) -> bool:
        """Anything waiting, riders included (delivered with a turn's tool results)."""
        return bool(self._items)

    def drain(self) -> list[str]:
        """Every queued item's text: input in arrival order, then the riders (a reminder
        reads after what it is about)."""
        self._waking = 0
        texts: list[str] = []
        riders: list[InboxItem] = []
        items = self._items
        while items and isinstance(items, deque):  # (nothing ever queued: the empty tuple)
            item = items.popleft()
            if not item.wakes:
                riders.append(item)
                continue
            texts.append(item.text)
            if item.on_delivered is not None:
                item.on_delivered()
        for item in riders:
            texts.append(item.text)
            if item.on_delivered is not None:
                item.on_delivered()
        return texts

    def wake(self) -> None:
        """Re-check ``expecting`` (called when something it depends on changed)."""
        if self._arrived is not None:
            self._arrived.set()

    async def wait_for_delivery(self) -> bool:
        """Wait for the next item while more are expected; True when one is pending."""
        while not self._waking:
            if self.expecting is None or not self.expecting():
                return False
            deadline = self.wait_deadline
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            if self._arrived is None:
                self._arrived = asyncio.Event()
            self._arrived.clear()
            try:
                async with asyncio.timeout(remaining):
                    await self._arrived.wait()
            except TimeoutError:
                return self._waking > 0
        return True
