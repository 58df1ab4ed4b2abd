"""Instructions per model call of the scripted fan-out, average and marginal (callgrind).

Load cannot move an instruction count, so this is the figure for telling two trees apart when
timings are noisy (docs/performance.md, "The per-model-call path, session 6"). Each figure is one
``valgrind --tool=callgrind`` process that runs a warm-up fan-out and then ``--runs`` measured
ones; only the measured ones are counted (``--toggle-collect`` on ``functools.reduce``, which
wraps them and nothing else). Two fan-outs are measured: N x K and N x 2K. The **average** is
the N x K count over its model calls; the **marginal** call is the difference over the extra
calls, i.e. the per-call path alone (no child starts, ends or writes a record in it).

    python bench/call_instructions.py                 # this tree
    PYTHONPATH=/other/tree/src python bench/call_instructions.py

``--durability off`` turns transcripts and sidecars off (``transcripts`` keeps transcripts).
Needs valgrind; about a minute per figure on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measured(n: int, k: int, runs: int, durability: str) -> None:
    """Inside valgrind: a warm-up fan-out, then ``runs`` counted ones; prints the model calls."""
    sys.path.insert(0, str(HERE))
    import bench

    bench.durability = durability
    script, _, config = bench.workload_of("fanout", 0, n, k)

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
        print("model calls", functools.reduce(one, folders[1:], 0), flush=True)


def count(n: int, k: int, runs: int, durability: str) -> tuple[int, int]:
    """(instructions, model calls) of ``runs`` fan-outs of ``n`` x ``k``."""
    sizes = [f"--n={n}", f"--k={k}", f"--runs={runs}", f"--durability={durability}"]
    return counted([__file__, "--inside", *sizes])


def counted(script: list[str]) -> tuple[int, int]:
    """(instructions, model calls) of ``python *script`` under callgrind, counting only inside
    ``functools.reduce``; the script prints ``model calls N``."""
    instructions, stdout = under_callgrind(script)
    calls = re.search(r"model calls (\d+)", stdout)
    if calls is None:
        raise RuntimeError(f"no model call count in the script's output:\n{stdout[-2000:]}")
    return instructions, int(calls.group(1))


def under_callgrind(script: list[str], *, out_file: str = "/dev/null") -> tuple[int, str]:
    """(instructions, stdout) of ``python *script`` under callgrind, collecting only inside
    ``functools.reduce`` (what a measuring script wraps its counted runs in), with
    ``PYTHONHASHSEED`` fixed so two runs of one tree agree closely; ``out_file`` keeps the
    profile for ``callgrind_annotate``. Shared by every instruction-counting bench."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--collect-atstart=no",
        "--toggle-collect=functools_reduce",
        f"--callgrind-out-file={out_file}",
        sys.executable,
        *script,
    ]
    env = dict(os.environ, PYTHONHASHSEED="0")
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    refs = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if refs is None:
        raise RuntimeError(f"no count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(refs.group(1).replace(",", "")), done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--durability", choices=("full", "transcripts", "off"), default="full")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inside:
        measured(args.n, args.k, args.runs, args.durability)
        return 0
    base, base_calls = count(args.n, args.k, args.runs, args.durability)
    more, more_calls = count(args.n, 2 * args.k, args.runs, args.durability)
    marginal = (more - base) / (more_calls - base_calls)
    print(
        f"fanout {args.n}x{args.k} durability={args.durability}: "
        f"{base / base_calls:,.0f} instructions per model call (average), "
        f"{marginal:,.0f} per marginal call ({args.n}x{2 * args.k} minus {args.n}x{args.k})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
