"""``MessageLog``: where a loop's messages go as they happen (a transcript)."""

from __future__ import annotations

from typing import Any, Protocol

from subagents.messages import Message


class MessageLog(Protocol):
    """Appends messages in order; ``flush`` ends each turn (``store.transcript.TranscriptWriter``
    implements it). ``record`` writes a non-message record (a compaction boundary) in order
    with them."""

    def append(self, message: Message) -> None: ...

    def record(self, entry: dict[str, Any]) -> None: ...

    def flush(self) -> None: ...
