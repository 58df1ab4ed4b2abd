"""Counting denials per agent, and the breaker that stops an agent that keeps retrying.

A model that is denied tends to try the same thing again, or a variation of it, and a
background child nobody watches can burn its whole budget that way. After
``max_consecutive`` denials in a row or ``max_total`` in all, the breaker trips and stays
tripped: every later call of that agent is denied with a message telling it to stop and report,
and ``breaker_tripped`` lets the runtime end the child.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(kw_only=True, frozen=True, slots=True)
class DenialLimits:
    """When the breaker trips (the numbers Claude Code uses for its own denial tracking)."""

    max_consecutive: int = 3
    max_total: int = 20


@dataclass(kw_only=True, slots=True)
class DenialTracker:
    """The denial counts of one agent."""

    limits: DenialLimits | None = DenialLimits()
    """None: count, but never trip."""
    consecutive: int = 0
    total: int = 0
    tripped: bool = False

    @property
    def breaker_tripped(self) -> bool:
        return self.tripped

    def record_denial(self) -> bool:
        """Count one denial; True when this denial tripped the breaker."""
        self.consecutive += 1
        self.total += 1
        limits = self.limits
        if self.tripped or limits is None:
            return False
        self.tripped = self.consecutive >= limits.max_consecutive or self.total >= limits.max_total
        return self.tripped

    def record_allow(self) -> None:
        """An allowed call ends a run of denials (the total stays)."""
        self.consecutive = 0

    def reset(self) -> None:
        """Close the breaker again, e.g. when a user resumes the agent with new instructions."""
        self.consecutive = 0
        self.total = 0
        self.tripped = False

    def stop_message(self) -> str:
        return (
            f"This agent has had {self.consecutive} tool calls denied in a row "
            f"({self.total} in total). Stop retrying denied actions and do not look for ways "
            "around them: finish now and report what you could not do and why."
        )
