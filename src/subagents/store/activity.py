"""Coalescing activity writes: at most one ``lastActiveAt`` write per run per interval.

The loop reports progress on every event (each streamed block, each tool result); writing the
sidecar each time would put an ``fsync`` on the hot path. SPEC §8 asks for at most one activity
write per second: the first touch after a quiet interval is written at once, later ones only
remember their time, and the next write of the record (the terminal one, at the latest) carries
the remembered time along, so the last activity is never lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable

DEFAULT_INTERVAL_S = 1.0


class ActivityThrottle:
    """Decides, per agent id, whether a touch is written now or held for the next write."""

    def __init__(
        self, *, clock: Callable[[], float] = time.time, interval: float = DEFAULT_INTERVAL_S
    ) -> None:
        self.clock = clock
        self.interval = interval
        self._written: dict[str, float] = {}
        self._pending: dict[str, float] = {}

    def touch(self, agent_id: str) -> float | None:
        """The time to write now, or None when the touch is held (coalesced)."""
        now = self.clock()
        last = self._written.get(agent_id)
        if last is not None and now - last < self.interval:
            self._pending[agent_id] = now
            return None
        return now

    def written(self, agent_id: str, at: float) -> None:
        """Record that ``lastActiveAt = at`` reached the store (any write carries it)."""
        self._written[agent_id] = at
        self._pending.pop(agent_id, None)

    def pending(self, agent_id: str) -> float | None:
        """A held activity time not yet written, to be carried by the next write."""
        return self._pending.get(agent_id)

    def forget(self, agent_id: str) -> None:
        """The run is terminal: nothing more to coalesce."""
        self._written.pop(agent_id, None)
        self._pending.pop(agent_id, None)

    def pending_ids(self) -> list[str]:
        return list(self._pending)
