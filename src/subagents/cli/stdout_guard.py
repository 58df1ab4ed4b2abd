"""Standard output whose reader may go away: ``subagents -p … | head``, an SDK process that
died, a closed pipe.

A write to a pipe nobody reads fails with ``EPIPE`` (Python ignores ``SIGPIPE``, so it is a
``BrokenPipeError``). Raised inside an event sink, it ended the run as an error of the session
("[Errno 32] Broken pipe", exit 2) from wherever the write happened. Now the first failed write
marks the output closed, points file descriptor 1 at ``/dev/null`` (so the interpreter's last
flush of what is still buffered cannot fail again) and calls ``on_close``: the headless run
aborts its session — no model call is made for a reader that is gone — which ends as every
aborted run does, its transcript and records durable, resumable with ``--resume``. The command
then says so in one line on stderr and exits with 141 (128 + SIGPIPE, what a shell reports for a
process that pipe killed). A descriptor 1 closed before the start (``>&-``: Python then has no
``sys.stdout``) is the same case.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

EXIT_CLOSED = 141


class StdoutGuard:
    """The command's writes to standard output, and whether its reader went away."""

    def __init__(self) -> None:
        self.closed = False
        self.on_close: Callable[[], None] | None = None

    def write(self, text: str) -> None:
        if self.closed:
            return
        stream = sys.stdout
        if stream is None:  # descriptor 1 was closed before the process started (``>&-``)
            self._closed_now()
            return
        try:
            stream.write(text)
            stream.flush()
        except BrokenPipeError:
            self._close(stream.fileno())

    def write_json(self, data: Any) -> None:
        self.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")

    def _close(self, fd: int) -> None:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        except OSError:
            pass  # later writes are dropped here either way
        self._closed_now()

    def _closed_now(self) -> None:
        self.closed = True
        if self.on_close is not None:
            self.on_close()

    def report(self, session_id: str | None, *, during_run: bool) -> int:
        """After the run: the line that says what happened, and the exit code. ``during_run``:
        the output closed while the run went on (it stopped), not at the result's write."""
        what = "the run stopped" if during_run else "before the result was written"
        resume = f"; `subagents --resume {session_id}` continues it" if session_id else ""
        print(
            f"subagents: error: standard output was closed (broken pipe): {what}{resume}",
            file=sys.stderr,
        )
        return EXIT_CLOSED
