"""Instructions a ``Read`` adds per model call of the CLI's fan-out, run in-process (callgrind).

The fan-out of ``bench/cli_fanout.py`` (N ``general-purpose`` children, each K model calls,
K-1 of them a ``Read`` of a small file of its project) through ``Session`` in this process, so
that callgrind sees the runtime and nothing of the CLI's start: a warm-up run, then ``--runs``
counted ones (``call_instructions.counted``: only inside the ``functools.reduce`` that wraps
them, and the threads started inside it; each run's scripted model is loaded before, as the CLI
loads it at start-up). The same
fan-out whose children call a tool that does not exist is the floor; the difference over the
model calls is what the Reads add (docs/performance.md, "CLI fan-out through real tools",
Sessions 8 and 9). Load cannot move these counts.

    python bench/read_instructions.py                  # this tree, tmpfs
    PYTHONPATH=/other/tree/src python bench/read_instructions.py

valgrind answers ``openat2`` with ENOSYS, so under callgrind a tree opens a path the way it
does without ``openat2``. About a minute per figure on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASE = Path("/dev/shm/sb-read-instructions")


def measured(tool: str, n: int, k: int, runs: int) -> None:
    """Inside valgrind: a warm-up fan-out, then ``runs`` counted ones; prints the model calls."""
    sys.path.insert(0, str(HERE))
    import cli_fanout
    from call_instructions import counted_reduce
    from subagents import Session, SessionOptions
    from subagents.testing import ScriptedModel

    files = cli_fanout.tree_files(100)
    BASE.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=BASE))
    project = cli_fanout.make_project(folder, files)
    os.environ["HOME"] = str(folder / "home")
    os.environ["SUBAGENTS_HOME"] = str(folder / "subagents-home")
    script = cli_fanout.fanout_script(n, k, files, tool)
    # Each run's model is made before the counted window: the CLI loads its script at start-up
    # (``--model scripted:FILE``), which bench/cli_fanout.py leaves out of its per-call figure,
    # and compiling these 51 entries of 502 turns costs ~33 M instructions (66 k per model
    # call of the run, in the Read and the no-tool count alike).
    models = [ScriptedModel.from_dict(script, keep_requests=False) for _ in range(runs + 1)]

    async def run() -> int:
        options = SessionOptions(model=models.pop(), cwd=project, home=folder / "home")
        result = await Session(options).run("go")
        if result.is_error:
            raise RuntimeError(result.result)
        return sum(agent.stats.num_turns for agent in result.agents)

    def one(calls: int, _: int) -> int:
        return calls + asyncio.run(run())

    try:
        one(0, 0)
        print("model calls", counted_reduce(one, range(runs), 0), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--inside", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inside:
        measured(args.inside, args.n, args.k, args.runs)
        return 0
    sys.path.insert(0, str(HERE))
    from call_instructions import counted

    sizes = [f"--n={args.n}", f"--k={args.k}", f"--runs={args.runs}"]
    read, calls = counted([__file__, "--inside=Read", *sizes])
    floor, floor_calls = counted([__file__, "--inside=NoSuchTool", *sizes])
    for label, of in (("all threads", lambda c: c.all), ("main thread", lambda c: c.main)):
        per_read, per_floor = of(read) / calls, of(floor) / floor_calls
        print(
            f"fan-out {args.n}x{args.k} general-purpose children, {label}: Read "
            f"{per_read:,.0f} instructions per model call, no tool {per_floor:,.0f}; "
            f"the Reads add {per_read - per_floor:,.0f} per model call"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
