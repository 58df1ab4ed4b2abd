"""The bench's instruction counts include the threads a counted window starts.

Callgrind's collection state is per thread, so ``bench/call_instructions.under_callgrind`` once
counted only the main thread's work inside its ``functools.reduce``: a session's durable writer
thread was never counted (docs/performance.md, session 11). ``counted_reduce`` runs each thread
started inside the window inside a ``reduce`` of its own; threads started before it stay out.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SPINS = 100_000

SCRIPT = textwrap.dedent(
    f"""
    import sys, threading
    sys.path.insert(0, {str(BENCH)!r})
    from call_instructions import counted_reduce

    def spin(n):
        total = 0
        for i in range(n):
            total += i
        return total

    go = threading.Event()
    def started_before():  # alive through the window, as a warm-up's thread would be
        go.wait()
        spin({4 * SPINS})
    early = threading.Thread(target=started_before)
    early.start()

    def window(calls, _):
        spin({SPINS})  # the main thread's share
        late = threading.Thread(target=spin, args=({SPINS},))
        late.start()
        late.join()
        go.set()
        early.join()
        return calls + 1

    print("model calls", counted_reduce(window, range(1), 0))
    """
)


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_a_thread_started_inside_the_window_is_counted_and_one_started_before_is_not(
    tmp_path: Path,
) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        from call_instructions import counted
    finally:
        sys.path.remove(str(BENCH))
    script = tmp_path / "threads.py"
    script.write_text(SCRIPT)
    counts, calls = counted([str(script)])
    assert calls == 1
    # The started thread did what the main thread did (the same spin); the thread started
    # before the window did four times as much and is not in the count.
    assert 0.8 < counts.threads / counts.main < 1.25, counts
    assert counts.all == counts.main + counts.threads
