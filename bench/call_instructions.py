"""Instructions per model call of the scripted fan-out, average and marginal (callgrind).

Load cannot move an instruction count, so this is the figure for telling two trees apart when
timings are noisy (docs/performance.md, "The per-model-call path, session 6"). Each figure is one
``valgrind --tool=callgrind`` process that runs a warm-up fan-out and then ``--runs`` measured
ones; only the measured ones are counted (``--toggle-collect`` on ``functools.reduce``, which
wraps them and nothing else: ``counted_reduce``). Callgrind's collection state is per thread, so
every thread started inside the window — the durable writer's, the ``git`` watchers' — runs its
whole life inside a ``reduce`` of its own and is counted too; the warm-up's threads are not.
Each figure is given for all threads and for the main thread alone (the only one counted
before session 12). Two fan-outs are measured: N x K and N x 2K. The **average** is
the N x K count over its model calls; the **marginal** call is the difference over the extra
calls, i.e. the per-call path alone (no child starts, ends or writes a record in it).

    python bench/call_instructions.py                 # this tree
    PYTHONPATH=/other/tree/src python bench/call_instructions.py

``--durability off`` turns transcripts and sidecars off (``transcripts`` keeps transcripts).
``--alone`` counts the main agent alone with K (and 2K) Note turns and no children, and
``--gc-off`` turns the collector off in the runs: with both (and ``--durability transcripts``)
two runs of one tree agree within ~0.1 k per call, where the fan-out's differ by ±1-2 k, so a
cut of a few hundred instructions shows (docs/performance.md, session 12).
``--part module:Class.method`` (up to eight, plain functions only) also gives each part's
inclusive instructions per model call, average and marginal (main thread): each is wrapped in a
C function of its own, as ``swarm_parts.py`` does. A wrapper adds ~2-2.5 k per call to its
part, and wrapped parts nested in one another inflate each other: count nested parts in
separate runs. Needs valgrind; about a minute per figure on a quiet machine.

    python bench/call_instructions.py --part subagents.loop.query:_Loop._record_tool_results
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve().parent

T = TypeVar("T")
U = TypeVar("U")


@dataclass(frozen=True)
class Counts:
    """Instructions counted in one callgrind run: the main thread's (inside its ``reduce``) and
    those of the threads started inside that window (``counted_reduce``)."""

    main: int
    threads: int

    @property
    def all(self) -> int:
        return self.main + self.threads


def counted_reduce(function: Callable[[T, U], T], items: Iterable[U], initial: T) -> T:
    """``functools.reduce(function, items, initial)``, the counted window, with every thread
    started inside it counted from its first Python step to its end (``under_callgrind``).

    Callgrind toggles collection per thread: a thread's work is collected only while that
    thread is inside a ``functools.reduce`` of its own. So while the window is open each new
    thread runs its bootstrap inside one (a few hundred instructions per thread of its own);
    threads started before it (the warm-up session's writer, if it were still alive) are not."""
    original = threading.Thread._bootstrap  # type: ignore[attr-defined]

    def bootstrap(thread: threading.Thread) -> None:
        functools.reduce(_run_bootstrap, (thread,), original)

    setattr(threading.Thread, "_bootstrap", bootstrap)  # noqa: B010 (a private method)
    try:
        return functools.reduce(function, items, initial)
    finally:
        setattr(threading.Thread, "_bootstrap", original)  # noqa: B010


def _run_bootstrap(bootstrap: Callable[[threading.Thread], None], thread: threading.Thread) -> Any:
    bootstrap(thread)
    return bootstrap


def alone_script(k: int) -> dict[str, Any]:
    """The main agent alone: ``k`` turns calling the bench's Note tool, then an answer."""
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "Note", "input": {"text": f"step {j}"}}]} for j in range(k)
    ]
    return {"agents": [{"agent_type": "main", "turns": [*turns, {"text": "done"}]}]}


def measured(
    n: int, k: int, runs: int, durability: str, parts: list[str], alone: bool, gc_off: bool
) -> None:
    """Inside valgrind: a warm-up fan-out, then ``runs`` counted ones; prints the model calls
    (and the wrapped parts' C functions)."""
    sys.path.insert(0, str(HERE))
    import bench
    from swarm_parts import wrap_parts

    if parts:
        print("parts", json.dumps(wrap_parts(parts)), flush=True)

    bench.durability = durability
    script, _, config = bench.workload_of("fanout", 0, n, k)
    if alone:
        script = alone_script(k)
    if gc_off:
        gc.disable()  # (the runtime then neither freezes nor tunes the collector)

    def one(calls: int, folder: Path) -> int:
        # The model and definitions are made before the counted window, as bench.py's clock
        # starts after them: compiling the script's 502 turns is ~33 M instructions, ~66 k per
        # model call (docs/performance.md, session 10), and no library user pays it per call.
        model, definitions = prepared[folder]
        return calls + asyncio.run(bench.run_prepared(model, definitions, folder, config))[0]

    with contextlib.ExitStack() as stack:
        folders = [
            Path(
                stack.enter_context(
                    tempfile.TemporaryDirectory(prefix="run-", dir=bench.bench_dir())
                )
            )
            for _ in range(runs + 1)
        ]
        prepared = {folder: bench.prepare(script, folder) for folder in folders}
        one(0, folders[0])
        print("model calls", counted_reduce(one, folders[1:], 0), flush=True)


def count(
    n: int, k: int, runs: int, durability: str, flags: Sequence[str] = ()
) -> tuple[Counts, int]:
    """(instructions, model calls) of ``runs`` fan-outs of ``n`` x ``k``."""
    sizes = [f"--n={n}", f"--k={k}", f"--runs={runs}", f"--durability={durability}"]
    return counted([__file__, "--inside", *sizes, *flags])


def count_parts(
    n: int, k: int, runs: int, durability: str, parts: list[str], flags: Sequence[str] = ()
) -> tuple[Counts, int, dict[str, int]]:
    """``count``, and each part's inclusive instructions (by ``--part`` name, main thread)."""
    from swarm_parts import inclusive_counts

    sizes = [f"--n={n}", f"--k={k}", f"--runs={runs}", f"--durability={durability}", *flags]
    with tempfile.TemporaryDirectory(prefix="call-parts-") as tmp:
        script = [__file__, "--inside", *sizes, *(f"--part={part}" for part in parts)]
        instructions, stdout = under_callgrind(script, keep=tmp)
        inclusive = inclusive_counts(f"{tmp}/callgrind.out-01")
    calls = re.search(r"model calls (\d+)", stdout)
    named = re.search(r"^parts (.*)$", stdout, re.MULTILINE)
    if calls is None or named is None:
        raise RuntimeError(f"no model call count or parts in the output:\n{stdout[-2000:]}")
    symbols = dict(json.loads(named.group(1)))
    return instructions, int(calls.group(1)), {p: inclusive.get(symbols[p], 0) for p in parts}


def counted(script: list[str]) -> tuple[Counts, int]:
    """(instructions, model calls) of ``python *script`` under callgrind, counting only inside
    ``functools.reduce`` (``counted_reduce``); the script prints ``model calls N``."""
    instructions, stdout = under_callgrind(script)
    calls = re.search(r"model calls (\d+)", stdout)
    if calls is None:
        raise RuntimeError(f"no model call count in the script's output:\n{stdout[-2000:]}")
    return instructions, int(calls.group(1))


def under_callgrind(script: list[str], *, keep: str | None = None) -> tuple[Counts, str]:
    """(instructions, stdout) of ``python *script`` under callgrind, collecting only inside
    ``functools.reduce`` (what a measuring script wraps its counted runs in: ``counted_reduce``,
    which puts the threads it starts inside one too), with ``PYTHONHASHSEED`` fixed so two runs
    of one tree agree closely. Shared by every instruction-counting bench.

    Each thread's profile is a file of its own (``--separate-threads``): the main thread's is
    ``callgrind.out-01``, which ``keep`` (a folder) keeps for ``callgrind_annotate``."""
    with tempfile.TemporaryDirectory(prefix="callgrind-") as scratch:
        folder = Path(keep or scratch)
        command = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=functools_reduce",
            "--separate-threads=yes",
            f"--callgrind-out-file={folder / 'callgrind.out'}",
            sys.executable,
            *script,
        ]
        env = dict(os.environ, PYTHONHASHSEED="0")
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
        per_thread = {
            int(path.name.rpartition("-")[2]): _events(path)
            for path in folder.glob("callgrind.out-*")
        }
    refs = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if refs is None or 1 not in per_thread:
        raise RuntimeError(f"no count in valgrind's output:\n{done.stderr[-2000:]}")
    total = int(refs.group(1).replace(",", ""))
    if total != sum(per_thread.values()):
        raise RuntimeError(f"thread profiles {per_thread} do not add up to {total}")
    return Counts(main=per_thread[1], threads=total - per_thread[1]), done.stdout


def _events(profile: Path) -> int:
    """The instructions a callgrind profile file counted (its ``summary:`` line)."""
    with profile.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--durability", choices=("full", "transcripts", "off"), default="full")
    parser.add_argument(
        "--part",
        action="append",
        default=[],
        help="module:function or module:Class.method whose instructions to count too",
    )
    parser.add_argument(
        "--alone",
        action="store_true",
        help="the main agent alone with K Note turns (no children: a steadier marginal call)",
    )
    parser.add_argument("--gc-off", action="store_true", help="the collector off in the runs")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inside:
        measured(args.n, args.k, args.runs, args.durability, args.part, args.alone, args.gc_off)
        return 0
    flags = [*(["--alone"] if args.alone else []), *(["--gc-off"] if args.gc_off else [])]
    if args.part:
        return print_parts(args.n, args.k, args.runs, args.durability, args.part, flags)
    base, base_calls = count(args.n, args.k, args.runs, args.durability, flags)
    more, more_calls = count(args.n, 2 * args.k, args.runs, args.durability, flags)
    extra = more_calls - base_calls
    what = f"main agent alone, {args.k} turns" if args.alone else f"fanout {args.n}x{args.k}"
    twice = f"{2 * args.k} turns" if args.alone else f"{args.n}x{2 * args.k}"
    once = f"{args.k} turns" if args.alone else f"{args.n}x{args.k}"
    print(
        f"{what} durability={args.durability}{' gc off' if args.gc_off else ''}, all threads: "
        f"{base.all / base_calls:,.0f} instructions per model call (average), "
        f"{(more.all - base.all) / extra:,.0f} per marginal call "
        f"({twice} minus {once}); main thread only: "
        f"{base.main / base_calls:,.0f} / {(more.main - base.main) / extra:,.0f}; "
        f"other threads (the durable writer, git watchers): "
        f"{base.threads / base_calls:,.0f} / {(more.threads - base.threads) / extra:,.0f}"
    )
    return 0


def print_parts(
    n: int, k: int, runs: int, durability: str, parts: list[str], flags: Sequence[str]
) -> int:
    base, base_calls, base_parts = count_parts(n, k, runs, durability, parts, flags)
    more, more_calls, more_parts = count_parts(n, 2 * k, runs, durability, parts, flags)
    extra = more_calls - base_calls
    print(
        f"fanout {n}x{k} durability={durability}, main thread, with the parts wrapped: "
        f"{base.main / base_calls:,.0f} average, {(more.main - base.main) / extra:,.0f} marginal"
    )
    for part in parts:
        average = base_parts[part] / base_calls
        marginal = (more_parts[part] - base_parts[part]) / extra
        print(f"  {part}: {average:,.0f} average, {marginal:,.0f} marginal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
