"""Standard descriptors closed before the start: ``subagents … <&-``, ``2>&-``, ``>&-``.

A closed descriptor 0, 1 or 2 is the lowest free number, so the first file the process opens
(the codegen cache, a transcript, a record, a lock) would get it: whatever is then written to
"standard error" — by the process or by a subprocess that inherits the descriptor — lands in
that file. Python also leaves ``sys.stdin``/``sys.stderr`` as ``None``: ``print(…,
file=sys.stderr)`` with a ``None`` file writes to *standard output* (into a ``stream-json``
protocol stream), and ``--input-format stream-json`` failed with a traceback on
``sys.stdin.buffer``.

``reopen_closed`` runs first in ``main``: each closed one is opened on ``/dev/null`` at its own
number. Standard input then reads as empty (a stream-json session ends at its EOF, as with
``</dev/null``), standard error discards, and ``sys.stdout`` stays ``None`` so that
``cli/stdout_guard`` reports the closed output (exit 141) as before.
"""

from __future__ import annotations

import os
import sys

STANDARD_FDS = (0, 1, 2)


def reopen_closed() -> frozenset[int]:
    """Open ``/dev/null`` on each closed standard descriptor; the ones that were closed."""
    closed = frozenset(fd for fd in STANDARD_FDS if not _is_open(fd))
    for fd in sorted(closed):  # lowest first: each open then returns that very number
        null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
    if 0 in closed:
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 (the process's)
    if 2 in closed:
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    return closed


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True
