"""``DurableWriter``: sidecar writes off the event loop, in order.

A durable sidecar write is a temp file, an ``fsync``, a rename and a directory ``fsync``: a few
milliseconds of waiting on the disk. Done on the event loop, that would stall every agent of the
session. The writer runs store calls on one dedicated thread, strictly in submission order (so a
child's terminal record can never be overtaken by an older activity update), and hands back a
future the caller may await — the background manager awaits the terminal write before it queues
the parent's notification, which is the order SPEC §8 requires.

``close`` drains the queue: a session that ends cleanly leaves every submitted write on disk.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class DurableWriter:
    """One worker thread applying store operations in order."""

    def __init__(self, name: str = "subagents-store") -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._last: concurrent.futures.Future[Any] | None = None
        self._closed = False

    def submit(
        self, fn: Callable[..., T], *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[T]:
        """Queue ``fn(*args, **kwargs)``; failures are logged (and kept in the future)."""
        if self._closed:
            raise RuntimeError("DurableWriter is closed")
        future = self._pool.submit(_logged, fn, *args, **kwargs)
        self._last = future
        return future

    async def wait(self, future: concurrent.futures.Future[T]) -> T:
        """Await a submitted write from the event loop."""
        return await asyncio.wrap_future(future)

    async def drain(self) -> None:
        """Wait until every write submitted so far is done."""
        last = self._last
        if last is not None:
            await asyncio.wait([asyncio.wrap_future(last)])

    def close(self) -> None:
        """Finish every queued write, then stop the thread. Safe to call twice."""
        if not self._closed:
            self._closed = True
            self._pool.shutdown(wait=True)


def _logged(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return fn(*args, **kwargs)
    except Exception:
        log.exception("durable write %s failed", getattr(fn, "__name__", fn))
        raise
