"""``DurableWriter``: sidecar writes off the event loop, in order, committed in groups.

A durable sidecar write is a temp file, an ``fsync``, a rename and a directory ``fsync``: a few
milliseconds of waiting on the disk. Done on the event loop, that would stall every agent of the
session. The writer runs store calls on one dedicated thread, strictly in submission order (so a
child's terminal record can never be overtaken by an older activity update), and hands back a
future the caller may await — the background manager awaits the terminal write before it queues
the parent's notification, which is the order SPEC §8 requires.

Group commit: when the thread wakes up it takes everything queued so far. Consecutive calls of
one store that offers ``apply_batch`` (``FileStore``) go to it as one batch, so fifty children
starting at once cost one ``syncfs`` rather than a hundred ``fsync`` calls; the batch applies
them in order, and each future completes only once its write is durable. Other calls (stores
without the hook, any other function) run one by one, in their place in the queue.

``close`` drains the queue: a session that ends cleanly leaves every submitted write on disk.
The thread is not a daemon, and it exits after a short idle spell (a new submission starts
another), so an interpreter that exits without ``close`` still finishes queued writes first.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FunctionType, MethodType
from typing import Any, TypeVar, cast

from subagents.store.capabilities import BatchOp, BatchWrites

log = logging.getLogger(__name__)

T = TypeVar("T")

IDLE_EXIT_S = 0.5
"""How long the worker thread waits for more work before it exits."""
MAX_BATCH = 256
"""At most this many queued calls are taken per wake-up (bounds the open temp files)."""


@dataclass
class WriterStats:
    """Counters for tests and diagnostics: how much grouping actually happened."""

    batches: int = 0
    """Batches handed to a store's ``apply_batch``."""
    batched_ops: int = 0
    largest_batch: int = 0
    single_calls: int = 0
    """Calls run one by one (not batchable)."""


@dataclass
class _Item:
    """One queued write: the call and the future its caller waits on."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    future: concurrent.futures.Future[Any] = field(default_factory=concurrent.futures.Future)


class DurableWriter:
    """One worker thread applying store operations in order, in groups where it can."""

    def __init__(self, name: str = "subagents-store", *, max_batch: int = MAX_BATCH) -> None:
        self._name = name
        self._max_batch = max_batch
        # A C queue: a hand-over costs one put and, when the thread sleeps, one wake-up (a
        # Condition and a deque cost several Python-level lock operations per submission).
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._lifecycle = threading.Lock()  # guards starting and retiring the worker
        self._worker: threading.Thread | None = None
        self._last: concurrent.futures.Future[Any] | None = None
        self._closed = False
        self.stats = WriterStats()

    def submit(
        self, fn: Callable[..., T], *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[T]:
        """Queue ``fn(*args, **kwargs)``; failures are logged (and kept in the future)."""
        item = _Item(fn=fn, args=args, kwargs=kwargs)
        with self._lifecycle:
            if self._closed:
                raise RuntimeError("DurableWriter is closed")
            self._queue.put(item)
            self._last = item.future
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name=f"{self._name}_0")
                self._worker.start()
        return item.future

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
        with self._lifecycle:
            self._closed = True
            worker = self._worker
            if worker is not None:
                self._queue.put(None)  # wakes a sleeping worker; it finishes the queue first
        if worker is not None and worker is not threading.current_thread():
            worker.join()
        self._last = None  # its callbacks may hold the caller (a cycle through this writer)

    # -- the worker thread ----------------------------------------------------------------

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            self._process(batch)

    def _next_batch(self) -> list[_Item] | None:
        """Everything queued (up to ``max_batch``), waiting for work; None when it is time to
        exit (closed, or idle for ``IDLE_EXIT_S``). ``None`` items are close markers."""
        try:
            first = self._queue.get(timeout=IDLE_EXIT_S)
        except queue.Empty:
            first = None
        items = [] if first is None else [first]
        while len(items) < self._max_batch:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                items.append(item)
        if items:
            return items
        with self._lifecycle:  # retire, unless a submission slipped in meanwhile
            if self._queue.empty():
                self._worker = None
                return None
        return items

    def _process(self, items: list[_Item]) -> None:
        """Run ``items`` in order: runs of batchable calls of one store as one batch each."""
        live = [item for item in items if item.future.set_running_or_notify_cancel()]
        start = 0
        while start < len(live):
            store = _batch_target(live[start])
            end = start + 1
            if store is not None:
                while end < len(live) and _batch_target(live[end]) is store:
                    end += 1
                self._run_batch(store, live[start:end])
            else:
                self._run_single(live[start])
            start = end

    def _run_batch(self, store: BatchWrites, items: list[_Item]) -> None:
        ops = [BatchOp(item.fn.__name__, item.args, item.kwargs) for item in items]
        self.stats.batches += 1
        self.stats.batched_ops += len(ops)
        self.stats.largest_batch = max(self.stats.largest_batch, len(ops))
        try:
            outcomes = store.apply_batch(ops)
        except Exception as exc:
            log.exception("durable write batch of %d operations failed", len(ops))
            for item in items:
                item.future.set_exception(exc)
            return
        for item, outcome in zip(items, outcomes, strict=True):
            if outcome.error is not None:
                log.error("durable write %s failed: %s", item.fn.__name__, outcome.error)
                item.future.set_exception(outcome.error)
            else:
                item.future.set_result(outcome.value)

    def _run_single(self, item: _Item) -> None:
        self.stats.single_calls += 1
        try:
            result = item.fn(*item.args, **item.kwargs)
        except BaseException as exc:
            log.exception("durable write %s failed", _name(item.fn))
            item.future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            item.future.set_result(result)


def _batch_target(item: _Item) -> BatchWrites | None:
    """The store ``item`` calls a batchable method of, if that store offers ``apply_batch``."""
    fn = item.fn
    if not isinstance(fn, MethodType):
        return None
    store = fn.__self__
    batching = _BATCHING.get(type(store))
    if batching is None:
        # A runtime Protocol check looks at every member: once per store class, not per call.
        batching = _BATCHING[type(store)] = isinstance(store, BatchWrites)
    if not batching:
        return None
    target = cast(BatchWrites, store)  # checked above, for its class
    return target if fn.__name__ in target.batchable_ops else None


_BATCHING: dict[type[object], bool] = {}


def _name(fn: Callable[..., Any]) -> str:
    return fn.__name__ if isinstance(fn, FunctionType | MethodType) else repr(fn)
