"""Scale and cache benchmarks: ``swarm`` (issue 4) and ``forks`` (issue 6), on the scripted model.

* ``swarm`` — one coordinator launches N background children (default 1,000) in one response;
  each child makes K model calls (default 5) with latency L (default 50 ms) and a trivial tool
  call per turn. Reported: model calls per CPU-second (the whole process: runtime, scripted
  model, durable transcripts and sidecars), and the memory one *idle* child costs — RSS sampled
  while every child is waiting on its model, minus the RSS before the launch, divided by N —
  and the CPU the garbage collector took (``gc.callbacks``). Beside them the floor, measured in
  a fresh interpreter: bare asyncio doing the same awaits (N tasks each holding a small dict,
  K sleeps of L), CPU per sleep and RSS per idle task; and after each measured run the *files
  floor* of its children in the same state folder (``bench.files_floor``: the transcript,
  records and markers SPEC §9 makes a durable runtime write, done by a bare loop).
  ``--runs R``: the mean over R runs (RSS from the first: later runs reuse memory the earlier
  ones freed); ``--count-calls``:
  Python function calls per model call (cProfile's count, per run and their mean over
  ``--runs``; load moves it only through what wall time decides — progress lines, activity
  writes, the grouping of notifications — a few per cent; ``--pinned`` turns the first two
  off, for counts and callgrind runs that compare trees on a loaded machine); ``--instructions``:
  callgrind instructions per child and per model call of one measured run after a warm-up
  (pinned as ``--pinned``; only the measured run is counted, with the threads it starts: all
  threads and the main thread alone), the figure load cannot move.
* ``forks`` — a parent runs P turns (default 50) of tool calls, then forks F children (default 20)
  in one response. Reported: the fraction of the forks' input tokens that the scripted model's
  prefix cache served (cache reads / all input tokens of fork requests), which is what a
  provider's prompt cache would give a byte-identical prefix.

Run: ``python bench/scale.py swarm [--n 1000 --k 5 --latency 50 --runs 5]`` or
``python bench/scale.py forks [--parent-turns 50 --forks 20]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import WORKER, NoteTool, bench_dir, files_floor, run_folder, settle, sweep
from subagents.agents.agent_tool import AgentTool
from subagents.agents.definitions import load_definitions
from subagents.config import RuntimeConfig
from subagents.session import Session, SessionOptions
from subagents.store.atomic import file_system_kind
from subagents.testing import ScriptedModel


def rss_kb() -> int:
    """Current resident set size (not the peak), from /proc."""
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * 4


def swarm_script(n: int, k: int, latency_ms: int) -> dict[str, Any]:
    launches = [
        {
            "name": "Agent",
            "input": {
                "description": f"swarm {i}",
                "prompt": f"swarm job {i}",
                "subagent_type": "worker",
                "run_in_background": True,
            },
        }
        for i in range(n)
    ]
    child_turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "Note", "input": {"text": f"t{j}"}}], "delay_ms": latency_ms}
        for j in range(k - 1)
    ]
    child_turns.append({"text": "done", "delay_ms": latency_ms})
    ack = [{"text": "ack"} for _ in range(n + 1)]
    return {
        "agents": [
            {"agent_type": "main", "turns": [{"tool_calls": launches}, *ack]},
            {"agent_type": "worker", "turns": child_turns},
        ]
    }


def session_for(script: dict[str, Any], workdir: Path, config: RuntimeConfig) -> Session:
    definitions = load_definitions(
        cwd=workdir, home=workdir, subagents_home=workdir / "home", cli_agents=json.dumps(WORKER)
    )
    return Session(
        SessionOptions(
            model=ScriptedModel.from_dict(script, keep_requests=False),
            cwd=workdir,
            home=workdir / "home",
            tools=[AgentTool(), NoteTool()],
            definitions=definitions,
            config=config,
        )
    )


class GcClock:
    """CPU spent in garbage collection while installed (``gc.callbacks``), per generation."""

    def __init__(self) -> None:
        self.cpu = [0.0, 0.0, 0.0]
        self.count = [0, 0, 0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
            return
        generation = info["generation"]
        self.cpu[generation] += time.process_time() - self._started
        self.count[generation] += 1

    def __enter__(self) -> GcClock:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self)


async def run_swarm(n: int, k: int, latency_ms: int, workdir: Path) -> dict[str, Any]:
    config = RuntimeConfig(max_concurrent_subagents=n + 10, tool_concurrency=n)
    session = session_for(swarm_script(n, k, latency_ms), workdir, config)
    base = rss_kb()
    samples: list[int] = []

    async def sample() -> None:
        # While the children wait on their first model call, each is idle: sample RSS then.
        # (A counter, not a list of the running children: the sampler's CPU is in the figure.)
        while True:
            await asyncio.sleep(latency_ms / 4000)
            if session.background.supervisor.watched >= n:
                samples.append(rss_kb())
            elif samples:
                return

    sampler = asyncio.create_task(sample())
    with GcClock() as collector:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        result = await session.run("swarm")
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    sampler.cancel()
    calls = sum(run.stats.num_turns for run in result.agents)
    completed = sum(1 for run in result.agents[1:] if run.status == "completed")
    idle_kb = (max(samples) - base) / n if samples else float("nan")
    return {
        "workload": "swarm",
        "children": n,
        "completed": completed,
        "model_calls": calls,
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "calls_per_cpu_second": round(calls / cpu),
        "cpu_us_per_call": round(cpu / calls * 1e6, 1),
        "gc_us_per_call": round(sum(collector.cpu) / calls * 1e6, 1),
        "gc_collections": collector.count,
        "rss_kb_per_idle_child": round(idle_kb, 1),
        "rss_samples": len(samples),
    }


async def bare_swarm(n: int, k: int, latency_ms: int) -> dict[str, Any]:
    """The floor: the swarm's awaits with no runtime — N tasks, each holding a small dict (its
    "state") and making K sleeps of L. CPU per sleep is what any asyncio program pays for a
    model call's wait on this machine; RSS per idle task is a coroutine, its task and a dict."""
    base = rss_kb()
    samples: list[int] = []
    waiting = 0

    async def child(index: int) -> None:
        nonlocal waiting
        state = {"id": f"a{index:08d}", "status": "running"}
        turns = {"turns": 0}
        waiting += 1
        for _ in range(k):
            await asyncio.sleep(latency_ms / 1000)
            turns["turns"] += 1
        state["status"] = "completed"
        waiting -= 1

    async def sample() -> None:
        while True:
            await asyncio.sleep(latency_ms / 4000)
            if waiting >= n:
                samples.append(rss_kb())
            elif samples:
                return

    sampler = asyncio.create_task(sample())
    cpu0 = time.process_time()
    await asyncio.gather(*(child(i) for i in range(n)))
    cpu = time.process_time() - cpu0
    sampler.cancel()
    return {
        "workload": "floor",
        "cpu_us_per_call": round(cpu / (n * k) * 1e6, 1),
        "calls_per_cpu_second": round(n * k / cpu),
        "rss_kb_per_idle_child": round((max(samples) - base) / n, 1) if samples else None,
    }


def floor_figures(n: int, k: int, latency_ms: int) -> dict[str, Any]:
    """``bare_swarm`` in a fresh interpreter: its RSS must not reuse memory the runtime freed."""
    command = [sys.executable, __file__, "floor", "--n", str(n), "--k", str(k)]
    command += ["--latency", str(latency_ms)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    figures: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return figures


FLOOR_WAVE = 250
"""Children per wave of the swarm's files floor (``bench.files_floor``): a measured swarm of
1,000 made 14 ``syncfs`` and 6 directory ``fsync`` calls with its warm-up (strace), ~10 of them
its own — the commit pipeline's rounds take a few hundred children's records at once."""


def swarm_runs(n: int, k: int, latency_ms: int, runs: int) -> dict[str, Any]:
    """A warm-up, the import-time heap frozen (as the CLI does), then ``runs`` measured runs.
    Only the first run's RSS is honest: later runs reuse memory the earlier ones freed."""
    with run_folder("warm-") as tmp:
        asyncio.run(run_swarm(min(n, 50), k, latency_ms, tmp))
    gc.freeze()
    from python_floor import floor_once  # it imports bench, as this module does

    measured = []
    floor = []
    python_floor: list[float] = []
    for _ in range(runs):
        with run_folder("scale-") as tmp:
            settle()  # no run pays the syncfs of the one before's writes (bench.settle)
            measured.append(asyncio.run(run_swarm(n, k, latency_ms, tmp)))
        # The same minutes, the same state folder: what the children's files cost bare.
        floor.append(files_floor(n, k, FLOOR_WAVE) / measured[-1]["model_calls"] * 1e6)
        python_floor.append(floor_once("swarm", n, k, latency_ms, n))
    first = measured[0]
    us = [run["cpu_us_per_call"] for run in measured]
    mean_us = sum(us) / len(us)
    return {
        **first,
        "runs": len(measured),
        "cpu_us_per_call": round(mean_us, 1),
        "calls_per_cpu_second": round(1e6 / mean_us),
        "run_calls_per_cpu_second": [run["calls_per_cpu_second"] for run in measured],
        "run_us": us,
        "run_wall_s": [run["wall_s"] for run in measured],
        "gc_us_per_call": round(sum(r["gc_us_per_call"] for r in measured) / len(measured), 1),
        "floor": floor_figures(n, k, latency_ms),
        "files_floor_us": [round(us, 1) for us in floor],
        "python_floor_us": [round(us, 1) for us in python_floor],
        "state_folder": str(bench_dir()),
        "fs": file_system_kind(os.stat(bench_dir()).st_dev),
    }


def count_swarm_calls(n: int, k: int, latency_ms: int, runs: int = 1) -> dict[str, Any]:
    """Python function calls per model call (cProfile's count over each of ``runs`` runs after a
    warm-up): a figure load cannot move, except through what wall time decides — a progress line
    per child at each supervisor sweep (every 5 s), an activity write per child past 10 s, how
    notifications group into the coordinator's turns; hence the per-run counts and their mean."""
    import cProfile
    import pstats

    with run_folder("warm-") as tmp:
        asyncio.run(run_swarm(min(n, 50), k, latency_ms, tmp))
    gc.freeze()
    counts: list[float] = []
    calls = 0
    for _ in range(runs):
        profile = cProfile.Profile()
        with run_folder("scale-") as tmp:
            profile.enable()
            figures = asyncio.run(run_swarm(n, k, latency_ms, tmp))
            profile.disable()
        calls = figures["model_calls"]
        counts.append(round(pstats.Stats(profile).total_calls / calls, 1))
    return {
        "workload": "swarm",
        "model_calls": calls,
        "python_calls_per_model_call": round(sum(counts) / len(counts), 1),
        "run_python_calls_per_model_call": counts,
    }


def swarm_instructions(n: int, k: int, latency_ms: int) -> dict[str, Any]:
    """Callgrind instructions of one measured swarm (warm-up, import heap frozen and the
    wall-time-decided work pinned off, as ``--pinned``), per child and per model call, of all
    threads and of the main thread alone. Only the measured run is counted (``--toggle-collect``
    on ``functools.reduce``, which wraps it and the threads it starts: ``counted_reduce``);
    ``PYTHONHASHSEED`` is fixed so two runs of one tree agree closely."""
    from call_instructions import under_callgrind

    script = [__file__, "swarm", "--inside-instructions", f"--n={n}", f"--k={k}"]
    counts, stdout = under_callgrind([*script, f"--latency={latency_ms}"])
    figures: dict[str, Any] = json.loads(stdout.splitlines()[-1])
    calls = figures["model_calls"]
    return {
        "workload": "swarm",
        "children": n,
        "model_calls": calls,
        "instructions_per_child": round(counts.all / n),
        "instructions_per_model_call": round(counts.all / calls),
        "main_thread_instructions_per_child": round(counts.main / n),
        "main_thread_instructions_per_model_call": round(counts.main / calls),
    }


def measured_swarm(n: int, k: int, latency_ms: int) -> dict[str, Any]:
    """Inside valgrind (``swarm_instructions``): a warm-up, then one run under ``reduce``."""
    from call_instructions import counted_reduce

    pin_wall_time_work()
    with run_folder("warm-") as tmp:
        asyncio.run(run_swarm(min(n, 50), k, latency_ms, tmp))
    gc.freeze()

    def one(_: object, __: int) -> dict[str, Any]:
        with run_folder("scale-") as tmp:
            return asyncio.run(run_swarm(n, k, latency_ms, tmp))

    figures: dict[str, Any] = counted_reduce(one, range(1), {})
    return figures


def forks_script(parent_turns: int, forks: int) -> dict[str, Any]:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "Note", "input": {"text": f"context step {i} " * 20}}]}
        for i in range(parent_turns)
    ]
    turns.append(
        {
            "tool_calls": [
                {
                    "name": "Agent",
                    "input": {"description": f"fork {i}", "prompt": f"fork scope {i}"},
                }
                for i in range(forks)
            ]
        }
    )
    turns.append({"text": "merged"})
    return {
        "agents": [
            {"agent_type": "main", "turns": turns},
            {"agent_type": "fork", "turns": [{"text": "Scope: {{prompt}}\nResult: ok"}]},
        ]
    }


async def run_forks(parent_turns: int, forks: int, workdir: Path) -> dict[str, Any]:
    session = session_for(
        forks_script(parent_turns, forks), workdir, RuntimeConfig(tool_concurrency=forks)
    )
    result = await session.run("forks")
    fork_runs = [run for run in result.agents if run.agent_type == "fork"]
    read = sum(run.usage.cache_read_input_tokens for run in fork_runs)
    total = sum(
        run.usage.input_tokens
        + run.usage.cache_read_input_tokens
        + run.usage.cache_creation_input_tokens
        for run in fork_runs
    )
    return {
        "workload": "forks",
        "parent_turns": parent_turns,
        "forks": len(fork_runs),
        "fork_input_tokens": total,
        "fork_cache_read_tokens": read,
        "cached_fraction": round(read / total, 4) if total else 0.0,
    }


def pin_wall_time_work() -> None:
    """``--pinned``: turn off the work wall time decides — a ``[progress]`` line per child at
    each supervisor sweep (every 5 s) and a ``lastActiveAt`` write per child past 10 s — so
    ``--count-calls`` (and a callgrind run) count the same work on a loaded machine, whose
    slower runs otherwise cross those lines (the count read 359-399 at load 14 against 327
    pinned). What remains wall-dependent is how notifications group into coordinator turns."""
    from subagents.agents import supervision
    from subagents.store import durable

    durable.ACTIVITY_INTERVAL_S = 1e9
    supervision.CHECK_MIN_S = supervision.CHECK_MAX_S = 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=("swarm", "forks", "floor"))
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--latency", type=int, default=50)
    parser.add_argument("--runs", type=int, default=1, help="measured swarm runs")
    parser.add_argument(
        "--count-calls",
        action="store_true",
        help="swarm: Python function calls per model call (cProfile's count, not a timing)",
    )
    parser.add_argument(
        "--pinned",
        action="store_true",
        help="swarm: no progress sweeps, no activity writes (see pin_wall_time_work)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="swarm: callgrind instructions per child and per model call (needs valgrind)",
    )
    parser.add_argument("--inside-instructions", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--parent-turns", type=int, default=50)
    parser.add_argument("--forks", type=int, default=20)
    args = parser.parse_args(argv)
    if args.pinned:
        pin_wall_time_work()
    if args.workload == "floor":
        figures = asyncio.run(bare_swarm(args.n, args.k, args.latency))
    elif args.workload == "swarm" and args.inside_instructions:
        figures = measured_swarm(args.n, args.k, args.latency)
    elif args.workload == "swarm" and args.instructions:
        figures = swarm_instructions(args.n, args.k, args.latency)
    elif args.workload == "swarm" and args.count_calls:
        figures = count_swarm_calls(args.n, args.k, args.latency, args.runs)
    elif args.workload == "swarm":
        figures = swarm_runs(args.n, args.k, args.latency, args.runs)
    else:
        with run_folder("scale-") as tmp:
            figures = asyncio.run(run_forks(args.parent_turns, args.forks, tmp))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    try:
        code = main()
    finally:
        sweep()
    sys.exit(code)
