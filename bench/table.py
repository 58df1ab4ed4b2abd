"""Every benchmark figure in one table, each beside its floor and its target.

Runs each bench in its own interpreter (``bench.py``, ``http_bench.py``, ``startup.py``,
``cli_fanout.py``, ``scale.py``) with ``--json`` and prints one Markdown table: the figure as the
mean with the range over the measured runs, the floors measured in the same run, and the target
of the issue that set it. The floors: bare asyncio (the same awaits with no runtime), a raw HTTP
client doing the same requests, the bare interpreter, the same CLI run with no tool work, a bare
loop reading the same files, and the *files floor* of every row that writes durable state
(``bench.files_floor``: the transcript, records, markers and syncs SPEC §9 makes its children
write, done by a bare loop in the same state folder after each measured run), and beside the
library and swarm rows the *Python floor* (``python_floor.floor_once``: SPEC's work per model
call and per child — reply, usage, history, transcript lines, tool look-up, pydantic validation,
records, markers, notifications — in straight-line Python, one session after each run): about
how far under the runtime one written in CPython could go.

State goes to ``SUBAGENTS_BENCH_DIR`` (default ``bench/.work``, an ordinary disk); the README
figures use ``/dev/shm/sb`` for the tmpfs rows, and the library row, the CLI rows and a second
swarm row run on the disk whatever it says. Each run and each floor starts in a fresh folder in
a block group of its own after an ``os.sync()``, and nothing is deleted until the table's end
(``bench.bench_dir``, ``settle``, ``run_folder``): on this VM's journal-less ext4 a create pays
for every file deleted near it in the minutes before, so without this a row measured what the
rows before it had deleted (docs/performance.md, "Session 9: the floors").

Run: ``python bench/table.py`` (four to five minutes on this project's 2-core machine, of which
~20-40 s is the final sweep: this VM's ext4 is mounted ``discard``, so each deleted file waits
1-3 ms for its discard; the disk swarm row's 15,210 files took 20 s) or
``python bench/table.py --runs 2`` for a quicker, noisier table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def run(script: str, *args: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The JSON lines a bench script prints. The scripts set their spent folders aside
    (``bench.run_folder``) and this table deletes them once, at its end (``sweep``): a file
    deleted on this VM's journal-less ext4 slows every create near it for minutes."""
    env = dict(os.environ if env is None else env, SUBAGENTS_BENCH_KEEP="1")
    command = [sys.executable, str(HERE / script), *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed:\n{done.stderr[-2000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def spread(values: list[float], unit: str = "", digits: int = 0) -> str:
    if not values:
        return "-"
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}{unit}"


def scripted_rows(runs: int) -> Iterator[list[str]]:
    for workload, latency in (("fanout", 0), ("fanout-wide", 0), ("fanout-wide", 20)):
        (row,) = run(
            "bench.py", "--workload", workload, "--latency", str(latency), "--runs", str(runs),
            "--json",
        )  # fmt: skip
        ratio = f"; wall/ideal {row['wall_over_ideal']:.2f}" if latency else ""
        yield [
            f"scripted {workload} 50 x 10, L = {latency} ms: CPU / model call",
            f"**{row['cpu_us_per_call']:.0f} µs** (runs {spread(row['run_us'])}){ratio}",
            f"bare asyncio {row['baseline_cpu_s'] / row['model_calls'] * 1e6:.0f} µs; "
            + files_floor_cell(row["files_floor_us"]),
            "≤ 50 µs (L = 0)" if latency == 0 else "wall ≤ 1.15 x ideal",
        ]


def files_floor_cell(floor: list[float]) -> str:
    """The files floor (``bench.files_floor``: the children's transcript, records, markers and
    syncs done by a bare loop in the same state folder after each run) as mean (range)."""
    if not floor:
        return "files floor -"
    return f"files floor {mean(floor):.0f} µs ({spread(floor)})"


def python_floor_cell(floor: list[float], *, per_second: bool = False) -> str:
    """The Python floor (``python_floor.floor_once``: SPEC's work per call and per child in
    straight-line code, one session after each run in the same folder) as mean (range)."""
    if not floor:
        return "Python floor -"
    if per_second:
        rates = [1e6 / us for us in floor]
        return f"Python floor {1e6 / mean(floor):,.0f} calls / CPU-s ({spread(rates)})"
    return f"Python floor {mean(floor):.0f} µs ({spread(floor)})"


def library_row(runs: int) -> Iterator[list[str]]:
    """Issue 20 target 5: in-process as a library user runs it, state on the ordinary disk
    (``bench/.work`` whatever ``SUBAGENTS_BENCH_DIR`` says), no ``gc.freeze`` by the caller."""
    env = {k: v for k, v in os.environ.items() if k != "SUBAGENTS_BENCH_DIR"}
    args = ("--workload", "fanout", "--latency", "0", "--runs", str(runs), "--library", "--json")
    (row,) = run("bench.py", *args, env=env)
    yield [
        "scripted fanout 50 x 10, L = 0, in-process library use (ext4, no caller gc.freeze)",
        f"**{row['cpu_us_per_call']:.0f} µs** (runs {spread(row['run_us'])}; kernel "
        f"{row['kernel_s'] / row['model_calls'] * 1e6:.0f})",
        f"{python_floor_cell(row['python_floor_us'])}; "
        f"{files_floor_cell(row['files_floor_us'])}; bare asyncio "
        f"{row['baseline_cpu_s'] / row['model_calls'] * 1e6:.0f} µs",
        "≤ 30 µs",
    ]


def http_rows(runs: int) -> Iterator[list[str]]:
    rows = run("http_bench.py", "--runs", str(runs), "--json")
    floors = {(r["provider"], r["what"], r["latency_ms"]): r for r in rows}
    for row in rows:
        if row["what"] not in ("lean", "sdk"):
            continue
        key = (row["provider"], row["latency_ms"])
        raw_httpx = floors[(*key[:1], "raw httpx", key[1])]
        raw_lean = floors[(*key[:1], "raw lean HTTP", key[1])]
        bare = floors[(*key[:1], "bare asyncio", key[1])]
        name = f"{row['provider']} over HTTP ({row['what']}), fan-out 50 x 10 caps 50"
        yield [
            f"{name}, L = {row['latency_ms']} ms: CPU / model call",
            f"**{row['cpu_us_per_call']:.0f} µs** (runs {spread(row['run_us'])})",
            f"raw httpx {raw_httpx['cpu_us_per_call']:.0f} µs; raw lean HTTP "
            f"{raw_lean['cpu_us_per_call']:.0f} µs; bare asyncio {bare['cpu_us_per_call']:.0f} µs",
            "≤ 300 µs",
        ]
        if row["wall_over_ideal"] is not None:
            yield [
                f"{name}, L = {row['latency_ms']} ms: wall / ideal",
                f"**{row['wall_over_ideal']:.2f}** (runs {spread(row['wall_runs'], digits=2)})",
                f"raw lean HTTP {raw_lean['wall_over_ideal']:.2f}; bare asyncio "
                f"{bare['wall_over_ideal']:.2f}",
                "≤ 1.15",
            ]


def startup_rows(runs: int) -> Iterator[list[str]]:
    rows = run("startup.py", "--runs", str(max(runs, 5)), "--json")
    floors = [r for r in rows if r["path"].startswith("floor")]
    floor = "; ".join(
        f"{r['path'][7:]} {sum(r['run_cpu_ms']) / len(r['run_cpu_ms']):.0f} ms" for r in floors
    )
    for row in rows:
        if row["path"].startswith("floor"):
            continue
        first = row["to_first_request_ms"]
        whole = row["run_cpu_ms"]
        yield [
            f"start-up {row['path'].strip()}: CPU to first model request",
            f"**{sum(first) / len(first):.0f} ms** (runs {spread(first)}); whole run "
            f"{sum(whole) / len(whole):.0f} ms",
            floor,
            "≤ 300 ms",
        ]


FS_NAMES = {
    "ext4": "ext4 (this VM's /, no journal)",
    "ext4-journal": "ext4 with a journal (a fresh loop-mounted image)",
}


def cli_rows(runs: int) -> Iterator[list[str]]:
    for row in run("cli_fanout.py", "--runs", str(runs), "--json"):
        yield [
            f"CLI `subagents -p` fan-out 50 x 10, general-purpose children doing Read, "
            f"{FS_NAMES.get(row['fs'], row['fs'])}: CPU / model call "
            f"(start-up apart: {mean(row['startup_ms']):.0f} ms)",
            f"**{row['cpu_us_per_call']:.0f} µs** (runs {spread(row['run_us'])})",
            f"the same fan-out with no tool run {mean(row['no_tool_us']):.0f} µs; raw "
            f"open/read/close of the files {mean(row['raw_read_us']):.0f} µs; "
            + files_floor_cell(row["files_floor_us"]),
            "≤ 100 µs",
        ]


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def swarm_rows(runs: int) -> Iterator[list[str]]:
    """Issue 20 target 6, state in ``SUBAGENTS_BENCH_DIR`` (tmpfs for the README) and, when
    that is another folder, again on the ordinary disk (``bench/.work``, ext4 here: a user's
    default ``~/.subagents`` is on a disk)."""
    folders: list[tuple[dict[str, str] | None, int]] = [(None, runs)]
    if os.environ.get("SUBAGENTS_BENCH_DIR", str(DEFAULT_DIR)) != str(DEFAULT_DIR):
        # At most three runs on the disk: each run and its floor leave ~5,000 files, and
        # deleting one costs 1-3 ms of wall on this VM's ext4 (mounted ``discard``: a
        # synchronous discard per freed block), paid by the sweep at the table's end.
        disk = {k: v for k, v in os.environ.items() if k != "SUBAGENTS_BENCH_DIR"}
        folders.append((disk, min(runs, 3)))
    for env, count in folders:
        (row,) = run("scale.py", "swarm", "--runs", str(count), env=env)
        floor = row["floor"]
        yield [
            f"swarm, 1,000 background children x 5 calls, L = 50 ms, state on {row['fs']}",
            f"**{row['calls_per_cpu_second']:,} calls / CPU-s** "
            f"(runs {spread(row['run_calls_per_cpu_second'])}; "
            f"{row['cpu_us_per_call']:.0f} µs / call, "
            f"of which garbage collection {row['gc_us_per_call']:.0f}); "
            f"{row['rss_kb_per_idle_child']:.0f} KB RSS per idle child",
            python_floor_cell(row["python_floor_us"], per_second=True) + "; "
            f"bare asyncio {floor['calls_per_cpu_second']:,} calls / CPU-s "
            f"({floor['cpu_us_per_call']:.0f} µs), "
            f"{floor['rss_kb_per_idle_child']:.1f} KB per idle task; "
            + files_floor_cell(row["files_floor_us"]),
            "≥ 20,000 calls / CPU-s; ≤ 30 KB",
        ]


DEFAULT_DIR = HERE / ".work"
"""``bench.bench_dir``'s folder when ``SUBAGENTS_BENCH_DIR`` is not set."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="measured runs per figure")
    parser.add_argument(
        "--skip", action="append", default=[], help="scripted|library|http|startup|cli|swarm"
    )
    args = parser.parse_args(argv)
    print("| figure | measured (mean, range over runs) | floor, same run | target |")
    print("|---|---|---|---|")
    sections = {
        "scripted": lambda: scripted_rows(args.runs),
        "library": lambda: library_row(args.runs),
        "http": lambda: http_rows(args.runs),
        "startup": lambda: startup_rows(args.runs),
        "cli": lambda: cli_rows(args.runs),
        "swarm": lambda: swarm_rows(args.runs),
    }
    try:
        for name, rows in sections.items():
            if name in args.skip:
                continue
            for cells in rows():
                print("| " + " | ".join(cells) + " |", flush=True)
    finally:
        sweep_all()
    return 0


def sweep_all() -> None:
    """Delete the folders every script set aside (``bench.run_folder``), once, at the end."""
    folders = {DEFAULT_DIR, Path(os.environ.get("SUBAGENTS_BENCH_DIR", DEFAULT_DIR))}
    folders.add(Path("/dev/shm/sb-cli"))  # cli_fanout.FOLDERS["tmpfs"]
    for folder in folders:
        shutil.rmtree(folder / ".spent", ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
