"""An owner's heartbeat in a store every node reaches (``store.capabilities.OwnerHeartbeats``).

A session owns its running children's records; on one machine a recovery probes the owner's
process (``process_identity.is_alive``), but a recovery on another node cannot, and without a
heartbeat it would have to take every remote owner for alive — a dead node's children would
stay ``running`` forever. So a session on such a store beats once before it can create a
record (``first_beat``, before recovery) and then every ``heartbeat_interval_s`` (a third of
the time-to-live) while it lives (``keep_beating``, beside the stop-request poller); recovery
elsewhere reads the expiry (``recovery.owner_liveness``).

A beat that fails (the database unreachable) is logged and retried at the next interval: an
owner that cannot beat for a whole time-to-live may be taken for dead, and its later writes
over a record recovery made terminal are refused by the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from subagents.store.capabilities import OwnerHeartbeats
from subagents.store.errors import StoreError
from subagents.store.process_identity import current_identity
from subagents.store.protocol import Store

log = logging.getLogger(__name__)


async def first_beat(store: Store) -> None:
    """Beat once now (a no-op for a store without heartbeats)."""
    if isinstance(store, OwnerHeartbeats):
        await _beat(store)


async def with_heartbeat(work: Callable[[], Coroutine[Any, Any, None]], store: Store) -> None:
    """Run ``work()`` (the session's stop-request poller) and, beside it, ``keep_beating``.

    A module function, not a session method: the task's frames (kept by its cancellation's
    traceback) must not hold the session, or a closed session is left to the cycle collector.
    ``work`` is called here, not by the caller: a task cancelled before it first runs (a
    one-shot run that ends at once) would leave a coroutine never awaited (a RuntimeWarning).
    """
    if not isinstance(store, OwnerHeartbeats):
        await work()
        return
    await asyncio.gather(work(), keep_beating(store))


async def keep_beating(store: Store) -> None:
    """Beat every ``heartbeat_interval_s`` until cancelled (returns at once without them)."""
    if not isinstance(store, OwnerHeartbeats):
        return
    while True:
        await asyncio.sleep(store.heartbeat_interval_s)
        await _beat(store)


async def _beat(store: OwnerHeartbeats) -> None:
    try:
        await asyncio.to_thread(store.beat, current_identity())
    except (OSError, StoreError) as exc:
        log.warning(
            "owner heartbeat failed (retried in %.1f s): %s", store.heartbeat_interval_s, exc
        )
