"""The inbox: an item that rides along is delivered with other input, never on its own."""

from __future__ import annotations

import asyncio
import time

from subagents.loop.inbox import Inbox, InboxItem


async def test_a_rider_neither_wakes_a_waiting_agent_nor_counts_as_pending() -> None:
    inbox = Inbox()
    inbox.expecting = lambda: True
    woken: list[str] = []
    inbox.on_put = lambda: woken.append("put")
    waiter = asyncio.create_task(inbox.wait_for_delivery(), name="test-inbox-waiter")
    await asyncio.sleep(0)
    assert inbox.put(InboxItem(id="reminder", text="a reminder", wakes=False))
    await asyncio.sleep(0.02)
    assert not waiter.done() and not inbox.pending() and inbox.queued() and woken == []
    inbox.put(InboxItem(id="note", text="a notification"))
    assert await asyncio.wait_for(waiter, 1) is True
    assert inbox.pending() and woken == ["put"]
    # Delivered together, the rider after what it is about; afterwards nothing is pending.
    assert inbox.drain() == ["a notification", "a reminder"]
    assert not inbox.pending() and not inbox.queued()


async def test_a_wait_that_times_out_with_only_a_rider_says_nothing_arrived() -> None:
    inbox = Inbox()
    inbox.expecting = lambda: True
    inbox.wait_deadline = time.monotonic() + 0.05
    inbox.put(InboxItem(id="reminder", text="a reminder", wakes=False))
    assert await inbox.wait_for_delivery() is False
    assert inbox.queued() and not inbox.pending()
    assert not inbox.put(InboxItem(id="reminder", text="again", wakes=False))
