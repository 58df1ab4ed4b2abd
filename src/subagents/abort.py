"""Abort signals: how a run is told to stop, and how that reaches its children.

An ``AbortSignal`` is a one-shot flag with callbacks, in the spirit of the web's
``AbortController``. Stopping work in asyncio is still done by cancelling tasks; the signal is the
*policy* of who cancels whom:

* a sync child's signal is a ``child()`` of its parent's: the parent's abort reaches the child, the
  child's own abort does not travel up;
* a background child gets a fresh, unlinked signal, so it survives the parent's interrupt and stops
  only by an explicit stop or shutdown;
* ``bind_task`` makes an abort cancel the task running an agent loop; the loop catches that
  cancellation, gives pending tool calls a cancelled result and ends with reason ``aborted``.

Callbacks run synchronously inside ``abort()``; they must be cheap and must not raise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from itertools import count

_ids = count()


class AbortSignal:
    """A one-shot stop flag that children can be linked to."""

    __slots__ = ("_callbacks", "_event", "reason")

    def __init__(self) -> None:
        self.reason: str | None = None
        """The first reason ``abort`` was given; None while not aborted. Read it, never set it
        (``abort`` sets it and runs the callbacks). A plain attribute, not a property: an agent
        loop reads it around every model call, and a property read is a call from C into
        Python on 3.11 (~600 instructions)."""
        self._callbacks: dict[int, Callable[[str], None]] = {}
        self._event: asyncio.Event | None = None

    @property
    def aborted(self) -> bool:
        return self.reason is not None

    def abort(self, reason: str = "aborted") -> None:
        """Set the flag (first reason wins) and run every callback once."""
        if self.reason is not None:
            return
        self.reason = reason
        callbacks = list(self._callbacks.values())
        self._callbacks.clear()
        for callback in callbacks:
            callback(reason)
        if self._event is not None:
            self._event.set()

    def on_abort(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(reason)`` on abort (now if already aborted); returns an unsubscribe."""
        if self.reason is not None:
            callback(self.reason)
            return _noop
        key = next(_ids)
        self._callbacks[key] = callback
        return _Unsubscribe(self._callbacks, key)

    def child(self) -> LinkedAbortSignal:
        """A signal aborted when this one is; aborting it leaves this one alone."""
        child = LinkedAbortSignal()
        child.unlink = self.on_abort(child.abort)
        return child

    def bind_task(self, task: asyncio.Task[object]) -> Callable[[], None]:
        """Cancel ``task`` when this signal aborts; returns an unsubscriber."""
        return self.on_abort(_CancelTask(task))

    async def wait(self) -> str:
        """Wait until aborted; returns the reason."""
        if self.reason is None:
            if self._event is None:
                self._event = asyncio.Event()
            await self._event.wait()
        assert self.reason is not None
        return self.reason


class LinkedAbortSignal(AbortSignal):
    """A child signal; ``unlink()`` detaches it from the parent once the child is done."""

    __slots__ = ("unlink",)

    def __init__(self) -> None:
        super().__init__()
        self.unlink: Callable[[], None] = _noop


def _noop() -> None:
    return None


# The two callbacks every agent's signal holds while it runs are objects with slots rather than
# closures: one tracked object each instead of a function, its cell tuple and a cell per
# variable, which the garbage collector visits for every waiting agent (docs/performance.md).


class _Unsubscribe:
    __slots__ = ("callbacks", "key")

    def __init__(self, callbacks: dict[int, Callable[[str], None]], key: int) -> None:
        self.callbacks, self.key = callbacks, key

    def __call__(self) -> None:
        self.callbacks.pop(self.key, None)


class _CancelTask:
    __slots__ = ("task",)

    def __init__(self, task: asyncio.Task[object]) -> None:
        self.task = task

    def __call__(self, reason: str) -> None:
        # A task that aborts itself is not cancelled: it is running right now and notices the
        # flag at its next check point. Cancelling it would end it mid-step instead.
        task = self.task
        if not task.done() and task is not _current_task():
            task.cancel(f"abort: {reason}")


def _current_task() -> asyncio.Task[object] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop: abort() called from plain code
        return None
