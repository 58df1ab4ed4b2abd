"""A descriptor budget for the processes a session starts: wait for room instead of ``EMFILE``.

Five hundred children under the common limit of 1,024 open files made 82 of their Bash calls
fail with "Too many open files": each running shell holds its output pipe, and each spawn needs
a few more for a moment (the exec error pipe, ``/dev/null`` for stdin, a hook's three pipes).
The transcripts keep to their own budget (``max_open_transcripts``: a quarter of the limit, at
least 64, which ``store.transcript`` keeps open); what is left,
less a reserve for everything else (sidecar writes, sockets, the files tools read), is shared by
the processes this runtime starts — Bash commands, hooks, ``rg`` — each counted at
``PROCESS_COST`` descriptors for as long as it runs. A process beyond the budget waits its turn
(``process_slot``); it is not refused. Should a spawn still meet ``EMFILE`` (descriptors held
elsewhere), ``retry_on_emfile`` waits and tries again, a bounded number of times.

One budget per event loop (asyncio primitives belong to one loop); a session runs in one. The
size is read once, after the CLI has lifted its soft limit. Long-lived background shells take no
slot: only their spawn is retried, so they can never starve the foreground.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

PROCESS_COST = 8
"""Descriptors one running process may take at its peak (its pipes plus the spawn's own)."""
RESERVE = 64
"""Kept for everything that is not a process: sidecar writes, sockets, files being read."""
MIN_SLOTS = 4
EMFILE_RETRIES = 8
EMFILE_FIRST_WAIT_S = 0.05

T = TypeVar("T")

_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)


MIN_OPEN_TRANSCRIPTS = 64
"""At least this many transcript files stay open at once, process-wide."""


@functools.cache
def max_open_transcripts() -> int:
    """How many transcript files stay open at once: a quarter of the open-file limit (at least
    ``MIN_OPEN_TRANSCRIPTS``). A thousand children running at once would otherwise hold a
    thousand descriptors (the common soft limit is 1,024, and sidecar writes and shells need
    some too); past the budget the least recently written one is closed and reopened at its
    next flush (``store.transcript``). Read once, after the CLI has lifted its soft limit."""
    soft = _soft_limit()
    if soft is None:
        return MIN_OPEN_TRANSCRIPTS
    if soft < 0:  # no limit
        return 4096
    return max(MIN_OPEN_TRANSCRIPTS, soft // 4)


def _soft_limit() -> int | None:
    """The soft open-file limit, -1 when there is none, None when it cannot be read."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, ValueError, OSError):
        return None
    return -1 if soft == resource.RLIM_INFINITY else soft


@functools.cache
def max_processes() -> int:
    """How many started processes may run at once in this process (see the module docstring):
    what the limit leaves beside the transcripts' budget and ``RESERVE``, ``PROCESS_COST``
    descriptors each (the transcripts' budget, not a quarter of the limit: under 256 it is
    their minimum of 64, more than a quarter)."""
    soft = _soft_limit()
    if soft is None:
        return 64
    if soft < 0:
        return 1024
    usable = soft - max_open_transcripts() - RESERVE
    return max(MIN_SLOTS, usable // PROCESS_COST)


def _semaphore() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    semaphore = _slots.get(loop)
    if semaphore is None:
        semaphore = _slots[loop] = asyncio.Semaphore(max_processes())
    return semaphore


@asynccontextmanager
async def process_slot() -> AsyncIterator[None]:
    """Hold one process slot for the body (waiting for one if all are taken)."""
    semaphore = _semaphore()
    async with semaphore:
        yield


async def retry_on_emfile(spawn: Callable[[], Awaitable[T]]) -> T:
    """``await spawn()``; on ``EMFILE``/``ENFILE`` wait (50 ms, doubling to ~6 s in all) and
    try again, so a momentary shortage delays a call instead of failing it."""
    wait = EMFILE_FIRST_WAIT_S
    for _ in range(EMFILE_RETRIES):
        try:
            return await spawn()
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                raise
        await asyncio.sleep(wait)
        wait = min(wait * 2, 2.0)
    return await spawn()


async def open_pipe() -> tuple[int, int]:
    """``os.pipe()``, retried on ``EMFILE`` like a spawn."""

    async def make() -> tuple[int, int]:
        return os.pipe()

    return await retry_on_emfile(make)
