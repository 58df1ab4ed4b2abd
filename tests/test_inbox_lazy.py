"""An inbox makes its queue and its set of ids at its first ``put`` and has slots (a swarm's
waiting children each held an empty deque, set and instance dict). Compared with a plain model
of the inbox over random sequences of puts (duplicates, riders), drains and checks; an inbox
that never received an item holds no container of its own; a team inbox keeps its attributes."""

from __future__ import annotations

import functools
import gc
import random
from collections import deque

import pytest

from subagents.agents.teams.inbox import TeamInbox
from subagents.loop.inbox import Inbox, InboxItem

_CONTAINERS = (deque, set, dict)


class _Plain:
    """The inbox as it was: a deque and a set from the start."""

    def __init__(self) -> None:
        self.items: list[InboxItem] = []
        self.seen: set[str] = set()

    def put(self, item: InboxItem) -> bool:
        if item.id in self.seen:
            return False
        self.seen.add(item.id)
        self.items.append(item)
        return True

    def drain(self) -> list[str]:
        texts = [i.text for i in self.items if i.wakes] + [
            i.text for i in self.items if not i.wakes
        ]
        self.items = []
        return texts

    def pending(self) -> bool:
        return any(i.wakes for i in self.items)

    def queued(self) -> bool:
        return bool(self.items)


@pytest.mark.parametrize("seed", range(30))
def test_an_inbox_does_what_the_plain_one_did(seed: int) -> None:
    rng = random.Random(seed)
    inbox, plain = Inbox(), _Plain()
    delivered: list[str] = []
    for step in range(rng.randrange(0, 40)):
        action = rng.random()
        if action < 0.6:
            ident = f"n{rng.randrange(8)}"
            item = InboxItem(
                id=ident,
                text=f"{ident}@{step}",
                wakes=rng.random() < 0.7,
                on_delivered=functools.partial(delivered.append, ident),
            )
            assert inbox.put(item) == plain.put(item)
        elif action < 0.8:
            assert inbox.drain() == plain.drain()
        assert inbox.pending() == plain.pending()
        assert inbox.queued() == plain.queued()
    assert inbox.drain() == plain.drain()


def test_an_inbox_that_never_received_an_item_holds_no_container_of_its_own() -> None:
    inboxes = [Inbox() for _ in range(3)]
    assert not hasattr(inboxes[0], "__dict__")
    assert inboxes[0].drain() == [] and not inboxes[0].queued() and not inboxes[0].pending()
    own = [r for inbox in inboxes for r in gc.get_referents(inbox) if type(r) in _CONTAINERS]
    assert own == []  # no deque, set or dict per inbox until its first put
    inboxes[0].put(InboxItem(id="a", text="x"))
    made = sorted(type(r).__name__ for r in gc.get_referents(inboxes[0]) if type(r) in _CONTAINERS)
    assert made == ["deque", "set"]
    assert not inboxes[0].put(InboxItem(id="a", text="again"))


def test_a_team_inbox_keeps_its_own_attributes() -> None:
    async def idle() -> str | None:
        return None

    inbox = TeamInbox(idle)
    inbox.before_idle = lambda: None
    inbox.shut_down(approved=True)
    assert inbox.approved and inbox.shutting_down
    assert inbox.put(InboxItem(id="m1", text="hello")) and inbox.drain() == ["hello"]
