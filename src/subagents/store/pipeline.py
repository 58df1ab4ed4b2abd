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

The end of a round comes back to the loop through a wake-up of the pipeline's own (``_Wake``,
Linux): an ``eventfd`` the writer thread writes *with the GIL held* and a reader of the loop's.
``loop.call_soon_threadsafe`` sends its wake-up with the GIL released, and taking it back
behind the busy loop was a third GIL hand-off per round for a thread that only goes back to
sleep (docs/performance.md, session 12). The descriptor is made at the first round and closed
by ``close`` (``DurableRecords.close``), or once nothing can write to it any more.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from subagents.store.atomic import release_fd, syncfs_once
from subagents.store.capabilities import OwnerCommit
from subagents.store.files import FileCommit, sync_renamed_together
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
    _wake: _Wake | None = None
    """The round's way back to the loop; None until the first round (or where there is none:
    then ``call_soon_threadsafe``)."""
    _fresh_devices: set[int] = field(default_factory=set)
    """File systems on which a commit in ``_fresh`` holds an open staged descriptor."""
    _closed: bool = False
    """No wake-up is made any more: ``close`` was called, or none could be made here."""
    _orphan: Round | None = None
    """A round that ended after its loop closed (no ``eventfd``), for ``move_to``."""

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
        if self._round is not None:
            self._keep_one_descriptor(commit)
        self._start_round()

    def _keep_one_descriptor(self, commit: OwnerCommit) -> None:
        """``commit`` waits for the next round: close its staged descriptors on a file system
        where a commit waiting with it holds one already. The round's ``syncfs`` needs one per
        file system (a per-file ``fsync`` reopens the temp file); without this, every loop
        iteration that staged a write while a slow round ran kept a descriptor open until the
        round after (58 at once among 200 background children under a limit of 150)."""
        if not isinstance(commit, FileCommit):
            return
        for write in commit.staged:
            if write.fd < 0:
                continue
            if write.info.st_dev in self._fresh_devices:
                release_fd(write)
            else:
                self._fresh_devices.add(write.info.st_dev)

    async def drain(self) -> None:
        """Wait until every commit added so far is done."""
        while self._round is not None:
            await asyncio.shield(self._round)

    def close(self) -> None:
        """Release the wake-up descriptor (on the loop's thread, after ``drain``). A round still
        in flight keeps it until it ends; a commit added later goes through
        ``call_soon_threadsafe``."""
        self._closed = True
        if self._round is None:
            self._release_wake()

    def _start_round(self) -> None:
        if self._round is not None or not (self._fresh or self._renamed):
            return
        fresh, renamed = self._fresh, self._renamed
        self._fresh, self._renamed = [], []
        self._fresh_devices.clear()
        self._round = self.loop.create_future()
        if self._wake is None and not self._closed:
            self._wake = _Wake.open(self.loop, self)
            self._closed = self._wake is None  # none here: do not try again each round
        wake = self._wake
        job = [c for c, _ in fresh], [c for c, _ in renamed]
        try:
            if wake is not None:
                self.writer.submit(_sync_and_wake, wake, fresh, renamed, *job)
                return
            synced = self.writer.submit(sync_round, *job)
        except RuntimeError as exc:  # the writer is closed: the session is going away
            self._end_round(fresh, renamed, exc)
            return
        synced.add_done_callback(lambda f: self._round_synced(fresh, renamed, f.exception()))

    def _round_synced(
        self,
        fresh: list[tuple[OwnerCommit, Done]],
        renamed: list[tuple[OwnerCommit, Done]],
        error: BaseException | None,
    ) -> None:
        """On the writer thread (no ``eventfd``): the round's end handed to the loop — or kept
        for ``move_to`` when that loop has closed."""
        try:
            self.loop.call_soon_threadsafe(self._end_round, fresh, renamed, error)
        except RuntimeError:  # the loop closed with this round in flight
            self._orphan = (fresh, renamed, error)

    def move_to(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop this pipeline ran on has closed (a session outliving an ``asyncio.run``):
        carry its commits on to ``loop``. A round in flight would have ended on the closed loop
        — its renames never made, its records lost — so the writer thread is waited for here
        (it runs its jobs in order: once a job submitted now is done, the round has handed its
        end over), and the round is ended on ``loop``; commits queued behind it follow."""
        if self._round is not None:
            try:
                self.writer.submit(_nothing).result()
            except RuntimeError:
                pass  # the writer is closed: its thread ran every job before it stopped
        wake, self._wake = self._wake, None
        finished, self._orphan = self._orphan, None
        if wake is not None:
            finished, wake._pending = wake._pending or finished, None
            wake.close()  # (its loop is closed: only the descriptor)
        self.loop, self._round, self._closed = loop, None, False
        if finished is not None:
            self._end_round(*finished)
        else:
            self._start_round()

    def _end_round(
        self,
        fresh: list[tuple[OwnerCommit, Done]],
        renamed: list[tuple[OwnerCommit, Done]],
        error: BaseException | None,
    ) -> None:
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
        if self._round is None and self._closed:
            self._release_wake()
        if round_ is not None and not round_.done():
            round_.set_result(None)

    def _release_wake(self) -> None:
        wake, self._wake = self._wake, None
        if wake is not None:
            wake.close()


Round = tuple[list[tuple[OwnerCommit, Done]], list[tuple[OwnerCommit, Done]], BaseException | None]
"""A finished round on its way back to the loop: its fresh and renamed commits, and the sync's
error."""


def _nothing() -> None:
    """A writer job that only marks its place in the queue (``move_to``)."""


def _sync_and_wake(
    wake: _Wake,
    fresh: list[tuple[OwnerCommit, Done]],
    renamed: list[tuple[OwnerCommit, Done]],
    fresh_commits: Sequence[OwnerCommit],
    renamed_commits: Sequence[OwnerCommit],
) -> None:
    """On the writer thread: the round's syncs, then its end handed to the loop."""
    try:
        sync_round(fresh_commits, renamed_commits)
    except BaseException as exc:  # the loop reports it; an interrupt still stops the thread
        wake.send((fresh, renamed, exc))
        if not isinstance(exc, Exception):
            raise
    else:
        wake.send((fresh, renamed, None))


class _Wake:
    """A finished round's way from the writer thread to its pipeline on the loop: an
    ``eventfd`` written with the GIL held (``ctypes.PyDLL``: ``os.write`` would release it, and
    the thread would then have to take it back from the busy loop only to go back to sleep),
    read by a reader of the loop's, which ends the round there.

    At most one round is in flight per pipeline, so one slot carries it. The loop's reader holds
    the pipeline, as the old ``call_soon_threadsafe`` callbacks did while a round ran. The
    descriptor is closed by ``close``, or else when nothing can write to it any more (this
    object collected: no pipeline, reader or queued round holds it)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, notify: Callable[[int], object]):
        self._loop = loop
        self._fd = fd
        self._notify = notify
        self._pending: Round | None = None
        self._close_fd = weakref.finalize(self, os.close, fd)  # runs once, whichever comes first
        self._pid = os.getpid()

    @classmethod
    def open(cls, loop: asyncio.AbstractEventLoop, pipeline: CommitPipeline) -> _Wake | None:
        """A wake-up registered with ``loop`` for ``pipeline``, or None where there is none
        (no ``eventfd`` or no PyDLL ``write``; a loop without ``add_reader``; no descriptor
        left: ``call_soon_threadsafe`` needs none)."""
        notify = _eventfd_notify()
        if notify is None:
            return None
        try:
            fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        except OSError:
            return None
        wake = cls(loop, fd, notify)
        try:
            loop.add_reader(wake._fd, wake._on_readable, pipeline)
        except (NotImplementedError, RuntimeError):  # a proactor loop, or a closed one
            wake._close_fd()
            return None
        return wake

    def send(self, finished: Round) -> None:
        """On the writer thread: hand ``finished`` over and wake the loop, GIL held."""
        self._pending = finished
        self._notify(self._fd)

    def _on_readable(self, pipeline: CommitPipeline) -> None:
        try:
            os.eventfd_read(self._fd)
        except BlockingIOError:
            return
        finished, self._pending = self._pending, None
        if finished is not None:
            pipeline._end_round(*finished)

    def close(self) -> None:
        """Unregister and close the descriptor (on the loop's thread). In a process forked from
        the loop's, only its own copy of the descriptor is closed: the epoll instance is shared
        with the parent, and unregistering there would take the parent's wake-up away."""
        if self._close_fd.alive and self._pid == os.getpid() and not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
        self._close_fd()


@functools.cache
def _eventfd_notify() -> Callable[[int], object] | None:
    """``notify(fd)``: add 1 to the eventfd ``fd`` with libc's ``write``, the GIL held; None
    where there is no ``eventfd`` (Linux only) or no such ``write``."""
    if not hasattr(os, "eventfd"):
        return None
    import ctypes  # at the first round, not at import

    try:
        write = ctypes.PyDLL(None).write
    except (OSError, AttributeError):
        return None
    write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    write.restype = ctypes.c_ssize_t
    one = ctypes.c_uint64(1)
    address = ctypes.addressof(one)

    def notify(fd: int, _keep: object = one) -> object:
        # A (non-blocking) eventfd write fails only when the counter would pass 2**64 - 2:
        # never here, as the loop reads it back to 0 before the next round is submitted.
        return write(fd, address, 8)

    return notify


def sync_round(fresh: Sequence[OwnerCommit], renamed: Sequence[OwnerCommit]) -> None:
    """On the writer thread: make the data of ``fresh`` and the publications of ``renamed``
    durable — file commits sharing a file system with one ``syncfs`` (two or more items), else
    the data commit by commit and the renames of file commits with one directory ``fsync`` per
    folder among them all (anything else commit by commit)."""
    if _syncfs_together(fresh, renamed):
        return
    for commit in fresh:
        commit.sync()
    file_commits = [commit for commit in renamed if isinstance(commit, FileCommit)]
    if len(file_commits) > 1:
        sync_renamed_together(file_commits)
    for commit in renamed:
        if len(file_commits) < 2 or not isinstance(commit, FileCommit):
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
