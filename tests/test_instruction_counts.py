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


class _Parted:
    """A class whose methods ``bench/swarm_parts.wrap_parts`` wraps."""

    def __init__(self, base: int) -> None:
        self.base = base

    def plain(self, x: int, *, y: int = 0) -> int:
        return self.base + x + y

    @staticmethod
    def static(x: int) -> int:
        return x * 2

    async def later(self) -> int:
        return self.base


def test_a_wrapped_part_answers_as_before_and_a_coroutine_function_is_refused() -> None:
    """A part wrapped for counting (``swarm_parts.py --part``, ``call_instructions.py --part``)
    runs inside its C function with its arguments and result unchanged, a static method stays
    one, and a coroutine function is refused (its wrapper would count only the coroutine's
    creation)."""
    sys.path.insert(0, str(BENCH))
    try:
        import swarm_parts
    finally:
        sys.path.remove(str(BENCH))
    plain, static = _Parted.plain, _Parted.static
    try:
        named = swarm_parts.wrap_parts([f"{__name__}:_Parted.plain", f"{__name__}:_Parted.static"])
        assert [symbol for _, symbol in named] == ["starmap_next", "filterfalse_next"]
        assert _Parted(1).plain(2, y=3) == 6
        assert _Parted(1).static(4) == _Parted.static(4) == 8
        with pytest.raises(SystemExit, match="coroutine"):
            swarm_parts.wrap_parts([f"{__name__}:_Parted.later"])
    finally:
        _Parted.plain = plain  # type: ignore[method-assign]
        _Parted.static = staticmethod(static)  # type: ignore[method-assign,assignment]
