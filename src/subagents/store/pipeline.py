"""``CommitPipeline``: owner commits through their two disk waits, one thread job per round.

An owner commit (``capabilities.OwnerCommit``; ``files.FileCommit`` for the file store) is
staged on the event loop and then needs two waits on the disk — its data before the renames,
the renames before it counts as durable — with the renames themselves run back on the loop
(``publish``). Done naively that is two writer-thread round trips per
commit, and every round trip is a GIL hand-off with the busy loop. The pipeline overlaps them:
each round syncs the data of every commit staged since the last round *and* the renames of every
commit published in the last round, with a single ``syncfs`` where the platform has one (it
flushes data and directory entries of the whole file system alike). So under steady load a
commit costs one round trip, and the last one of a burst two.

A commit with nothing to wait for (``needs_sync`` False: a RAM file system, a memory store)
skips the rounds altogether: it is published as soon as it is added.

Order is kept: commits are published in the order they were staged (a round publishes only what
was staged before it started), so a child's terminal record can never be overtaken by its start
record. A commit is *done* — its callback runs — once its renames are durable.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from subagents.store.atomic import syncfs_once
from subagents.store.capabilities import OwnerCommit
from subagents.store.files import FileCommit
from subagents.store.writer import DurableWriter

log = logging.getLogger(__name__)

Done = Callable[[OwnerCommit], None]


@dataclass(kw_only=True)
class CommitPipeline:
    """Owner commits of one session, in order, through rounds on ``writer``'s thread."""

    writer: DurableWriter
    loop: asyncio.AbstractEventLoop
    _fresh: list[tuple[OwnerCommit, Done]] = field(default_factory=list)
    """Staged, waiting for their data to be synced."""
    _renamed: list[tuple[OwnerCommit, Done]] = field(default_factory=list)
    """Published (renamed), waiting for the renames to be synced."""
    _round: asyncio.Future[None] | None = None

    def add(self, commit: OwnerCommit, done: Done) -> None:
        """Take a freshly staged commit; ``done(commit)`` runs on the loop when it is durable
        (or failed: see ``commit.errors``)."""
        if not commit.needs_sync:
            # A RAM file system (tmpfs): a sync has nothing to wait for, so there is no round
            # trip to the thread; the renames alone complete the commit. Order holds: a record
            # always lives on the same file system, so all its commits take this path.
            commit.publish()
            done(commit)
            return
        self._fresh.append((commit, done))
        self._start_round()

    async def drain(self) -> None:
        """Wait until every commit added so far is done."""
        while self._round is not None:
            await asyncio.shield(self._round)

    def _start_round(self) -> None:
        if self._round is not None or not (self._fresh or self._renamed):
            return
        fresh, renamed = self._fresh, self._renamed
        self._fresh, self._renamed = [], []
        self._round = self.loop.create_future()
        job = [c for c, _ in fresh], [c for c, _ in renamed]
        try:
            synced = self.writer.submit(sync_round, *job)
        except RuntimeError as exc:  # the writer is closed: the session is going away
            synced = concurrent.futures.Future()
            synced.set_exception(exc)
            self._end_round(fresh, renamed, synced)
            return
        synced.add_done_callback(
            lambda f: self.loop.call_soon_threadsafe(self._end_round, fresh, renamed, f)
        )

    def _end_round(
        self,
        fresh: list[tuple[OwnerCommit, Done]],
        renamed: list[tuple[OwnerCommit, Done]],
        synced: concurrent.futures.Future[None],
    ) -> None:
        error = synced.exception()
        if error is not None:
            log.error("durable sync failed: %s", error)
        for commit, done in renamed:
            if error is not None:
                commit.fail(error)
            done(commit)
        for commit, done in fresh:
            commit.publish(failed=error)
            self._renamed.append((commit, done))
        round_, self._round = self._round, None
        self._start_round()
        if round_ is not None and not round_.done():
            round_.set_result(None)


def sync_round(fresh: Sequence[OwnerCommit], renamed: Sequence[OwnerCommit]) -> None:
    """On the writer thread: make the data of ``fresh`` and the publications of ``renamed``
    durable — file commits sharing a file system with one ``syncfs`` (two or more items),
    anything else commit by commit."""
    if _syncfs_together(fresh, renamed):
        return
    for commit in fresh:
        commit.sync()
    for commit in renamed:
        commit.sync_renamed()


def _syncfs_together(fresh: Sequence[OwnerCommit], renamed: Sequence[OwnerCommit]) -> bool:
    files = [c for c in (*fresh, *renamed) if isinstance(c, FileCommit)]
    if len(files) != len(fresh) + len(renamed):
        return False
    staged = [
        write for commit in fresh if isinstance(commit, FileCommit) for write in commit.staged
    ]
    devices = {write.info.st_dev for commit in files for write in commit.staged}
    fds = [write.fd for write in staged if write.fd >= 0]
    together = bool(fds) and len(devices) == 1 and len(staged) + len(renamed) > 1
    return together and syncfs_once(fds[0])
