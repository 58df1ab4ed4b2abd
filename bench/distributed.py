"""N background agents on a local Ray cluster with the PostgreSQL store, against the local executor.

Each run is one session on the scripted model: the main agent launches N background children in
one turn (``run_in_background``), each child makes K model calls (K-1 turns calling Glob, then a
final answer), and the main agent hears every notification. Both executors use the same
PostgreSQL store on a throwaway cluster (``testing/pg_cluster.py``); the Ray cluster is a local
``ray start --head`` (``testing/ray_cluster.py``) with one ``ChildHost`` actor per CPU.

Reported per executor:

* ``startup_s`` — Ray only: connecting the driver and starting the host actors (the first
  child's placement), measured around ``RayExecutor.host_pids``;
* ``wall_s`` — the session's run, start to result;
* ``cpu_s`` — CPU of every process doing the work: the driver (this process), the Ray host
  workers (``/proc/<pid>/stat`` of the host actors) and the PostgreSQL server processes; Ray's
  own daemons (GCS, raylet) are reported apart as ``ray_daemons_cpu_s``;
* ``calls_per_cpu_s`` — model calls / ``cpu_s``; ``us_per_call`` — its inverse.

Run: ``python bench/distributed.py --n 200 --k 3`` (the README figure: ``--n 1000``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from subagents import Session, SessionOptions
from subagents.store.postgres import PostgresStore
from subagents.testing.pg_cluster import PgCluster, find_bindir
from subagents.testing.ray_cluster import LOOPBACK_ENV, RayCluster, ray_command

TICKS = os.sysconf("SC_CLK_TCK")


def script(n: int, k: int) -> dict[str, Any]:
    calls = [
        {
            "name": "Agent",
            "input": {
                "description": f"job {i}",
                "prompt": f"job {i}",
                "subagent_type": "general-purpose",
                "run_in_background": True,
            },
        }
        for i in range(n)
    ]
    child_turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "Glob", "input": {"pattern": "*.none"}}]} for _ in range(k - 1)
    ]
    child_turns.append({"text": "done {{match.1}}"})
    return {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": calls},
                    {"text": "launched"},
                    *({"text": "ok"} for _ in range(n)),
                ],
            },
            {"agent_type": "general-purpose", "match": r"job (\d+)", "turns": child_turns},
        ]
    }


def proc_cpu(pids: list[int], *, reaped: bool = False) -> float:
    """CPU seconds of ``pids``; ``reaped``: plus their children that have exited (a
    PostgreSQL backend ends with its connection and is counted in its postmaster)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):  # ESRCH: it exited mid-read
            continue
        total += (int(fields[11]) + int(fields[12])) / TICKS
        if reaped:
            total += (int(fields[13]) + int(fields[14])) / TICKS
    return total


def postgres_cpu(pg: PgCluster) -> float:
    pids = pg.server_pids()
    return proc_cpu(pids[:1], reaped=True) + proc_cpu(pids[1:])


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def one_run(
    executor: str, spec: str, cwd: Path, url: str, n: int, ray: RayCluster | None, pg: PgCluster
) -> dict[str, Any]:
    options = SessionOptions(
        model=spec, cwd=cwd, store=PostgresStore(url), background_wait_ms=600_000
    )
    startup = 0.0
    host_pids: list[int] = []
    if executor == "ray":
        # Imported here: Ray reads its network settings (LOOPBACK_ENV) when it is imported.
        from subagents.distributed.ray_executor import RayExecutor

        assert ray is not None
        ray_exec = RayExecutor(model_spec=spec, address=ray.address)
        started = time.perf_counter()
        host_pids = await ray_exec.host_pids()
        startup = time.perf_counter() - started
        options.executor = ray_exec
    daemons = [p for p in ray.pids() if p not in host_pids] if ray else []
    before = (self_cpu(), proc_cpu(host_pids), postgres_cpu(pg), proc_cpu(daemons))
    started = time.perf_counter()
    result = await Session(options).run("go")
    wall = time.perf_counter() - started
    await asyncio.sleep(0.5)  # the session's database connections close and are reaped
    after = (self_cpu(), proc_cpu(host_pids), postgres_cpu(pg), proc_cpu(daemons))
    driver, hosts, postgres, ray_daemons = (b - a for a, b in zip(before, after, strict=True))
    assert result.payload["subtype"] == "success", result.payload
    return {
        "executor": executor,
        "startup_s": round(startup, 2),
        "wall_s": round(wall, 2),
        "driver_cpu_s": round(driver, 2),
        "hosts_cpu_s": round(hosts, 2),
        "postgres_cpu_s": round(postgres, 2),
        "ray_daemons_cpu_s": round(ray_daemons, 2),
        "cpu_s": round(driver + hosts + postgres, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--executor", choices=["both", "local", "ray"], default="both")
    args = parser.parse_args()
    os.environ.update(LOOPBACK_ENV)
    os.environ["SUBAGENTS_MAX_CONCURRENT_SUBAGENTS"] = str(args.n + 10)
    os.environ["SUBAGENTS_MAX_TOOL_CONCURRENCY"] = str(args.n + 10)
    bindir, command = find_bindir(), ray_command()
    if bindir is None or command is None:
        sys.exit("bench/distributed.py needs PostgreSQL and Ray: run scripts/setup")
    work = Path(tempfile.mkdtemp(prefix="sa-bench-dist-"))
    os.environ["SUBAGENTS_HOME"] = str(work / "home")
    # The children's Glob walks the project: it must not hold the state folder (their own
    # transcripts, growing with N, would make each call cost O(N)).
    project = work / "project"
    project.mkdir()
    path = work / "script.json"
    path.write_text(json.dumps(script(args.n, args.k)))
    spec = f"scripted:{path}"
    pg = PgCluster(bindir, fsync=True).start()
    ray: RayCluster | None = None
    calls = 2 + args.n + args.n * args.k
    try:
        if args.executor != "local":
            ray = RayCluster(command).start()
        for executor in ("local", "ray") if args.executor == "both" else (args.executor,):
            row = asyncio.run(one_run(executor, spec, project, pg.fresh_url(), args.n, ray, pg))
            row["model_calls"] = calls
            row["calls_per_cpu_s"] = round(calls / row["cpu_s"], 1)
            row["us_per_call"] = round(row["cpu_s"] / calls * 1e6, 1)
            print(json.dumps(row))
    finally:
        if ray is not None:
            ray.stop()
        pg.stop()


if __name__ == "__main__":
    main()
