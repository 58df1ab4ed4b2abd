"""The process entry point of the ``subagents`` command (and ``python -m subagents``): ``main``,
then the exit a finished process needs, without the interpreter's teardown.

Why: when a Python process exits normally, after the non-daemon threads are joined, the
``atexit`` callbacks run and the standard streams are flushed, the interpreter tears itself
down: it clears every module and frees every object one by one, garbage collections included.
Nothing of that is visible outside the process (the kernel takes its memory back either way),
but after a run it is a large heap: about 15 ms of CPU at the end of a 50-child ``-p`` fan-out,
~30 µs per model call of it (measured against ``os._exit`` in the same place;
docs/performance.md, "CLI fan-out through real tools").

How: ``run`` registers ``_exit_now`` as the first ``atexit`` callback of the process, before
the runtime is imported (``prepare_exit``); ``atexit`` runs callbacks last-registered first, so
it runs after every other one (logging's flush, telemetry's exporters, anything a library
registered). When ``main`` returned its exit code, ``_exit_now`` flushes ``stdout`` and
``stderr`` and ends the process with ``os._exit(code)``: everything the interpreter does before
its teardown has happened by then, in its own order. The ordinary exit is kept when this cannot
be the last callback (one was registered before ``run``: a ``sitecustomize``, ``coverage``'s
start-up hook), when ``main`` raised (``SystemExit`` from argument parsing, an interrupt, a bug:
the interpreter prints and exits as usual), and when a stream cannot be flushed (a closed pipe:
the interpreter reports it and exits with 120, as it always did).

``main`` itself stays an ordinary function: a program or test that calls it in-process keeps
its interpreter.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import NoReturn


class _Exit:
    """The code ``main`` returned (``None`` until it returned)."""

    code: int | None = None


def run() -> NoReturn:
    """Run ``subagents`` with the process's arguments and exit with its code."""
    prepare_exit()
    from subagents.cli.main import main

    exit_with(main())


def prepare_exit() -> None:
    """Register the exit without teardown, if nothing registered an ``atexit`` callback yet
    (nothing can then run after it). Called before the runtime is imported."""
    if atexit._ncallbacks() == 0:
        atexit.register(_exit_now)


def exit_with(code: int) -> NoReturn:
    """Exit with ``main``'s code: the interpreter's exit, ended by ``_exit_now`` before its
    teardown when ``prepare_exit`` could register it."""
    _Exit.code = code
    sys.exit(code)


def _exit_now() -> None:
    code = _Exit.code
    if code is None:
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return  # the interpreter's own exit reports it (and exits with 120)
    os._exit(code)
