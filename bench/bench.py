"""Orchestration overhead of the runtime, on the scripted model (no real model, no network).

Workloads (SPEC/issue 2, 3):

* ``fanout`` — the coordinator emits N parallel Agent calls in one response; each child runs a
  tool-using loop of K model calls (K-1 turns calling a trivial tool, then a final answer); then
  the coordinator answers. Model calls: 2 + N*K. Ideal critical path: (K + 2) * L.
  With the default limits (at most 10 concurrency-safe calls of one turn at once, SPEC §1) the
  children run in waves of 10, so the ideal is (ceil(N/10) * K + 2) * L; ``fanout-wide`` raises
  both limits to N (``SUBAGENTS_MAX_TOOL_CONCURRENCY``, ``SUBAGENTS_MAX_CONCURRENT_SUBAGENTS``)
  and its ideal is (K + 2) * L.
* ``chain``  — the coordinator delegates N times in sequence (one Agent call per turn); each
  child makes one tool call and answers. Model calls: N + 1 + 2N. Ideal: (3N + 1) * L.

Each figure is set beside *bare asyncio*: the same pattern of awaits (the same sleeps, the same
concurrency) with no runtime at all, because on a virtual machine each wake-up from a sleep costs
tens of µs of kernel CPU that no framework can avoid. ``net`` is our CPU minus that baseline.

Reported: CPU µs per model call (process CPU time of the whole run divided by model calls: this
includes the scripted model, tool scheduling, context derivation, events and durable JSONL
transcripts, which are on as by default), wall / ideal critical path, and peak RSS.

Run: ``python bench/bench.py`` (all workloads at L = 0 and 20 ms), or
``python bench/bench.py --workload fanout --latency 20 --n 50 --k 10``.

``--telemetry`` measures OpenTelemetry's cost (docs/telemetry.md): ``off`` (default, the figure
above), ``memory`` (the SDK with batched span processing into an in-memory exporter and an
in-memory metric reader: the cost of making spans and metrics), ``otlp`` (batched OTLP/HTTP
export to a receiver in another process on 127.0.0.1, flushed at each session's end, so the
encoding and sending are in the figure and the receiver's decoding is not).

``--library`` is the figure of issue 20 target 5: the runtime as a library user runs it — through
the public API (``subagents.__all__``, as every mode here), full durability, no ``gc.freeze()``
by the caller (the runtime freezes its import heap itself at the first session: ``gc_heap``),
state on the default folder (``bench/.work``, an ordinary disk). With sidecars on, each fan-out
row also shows the *files floor*: the same file system calls per child done by a bare loop
(``files_floor``) in the same state folder after each measured run, per model call — what no
runtime can go under while it writes what we write.

The disk state is kept the same for every run and floor: each starts in a fresh folder placed in
a block group of its own (``bench_dir``), after an ``os.sync()`` (``settle``), and nothing is
deleted until the script ends (``run_folder``, ``sweep``): on this VM's journal-less ext4 a file
create pays for every inode deleted near it in the minutes before.

``--count-calls`` prints Python function calls per model call instead (cProfile's count over one
session after a warm-up): a figure load cannot move, for telling whether a change added work to
the hot path when timings on a busy machine are too noisy to say.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

# Only the public API (``subagents.__all__``): the bench runs the runtime as a library user does.
from subagents import (
    CallInfo,
    DefinitionSet,
    RuntimeConfig,
    ScriptedModel,
    Session,
    SessionOptions,
    Tool,
    ToolContext,
    ToolInput,
    ToolOutput,
    load_definitions,
)


class NoteInput(ToolInput):
    text: str


class NoteTool(Tool[NoteInput]):
    """A trivial tool, so the figure measures orchestration rather than a tool's own work."""

    name = "Note"
    description = "Record a short note."
    input_model = NoteInput

    def is_read_only(self, args: NoteInput) -> bool:
        return True

    def is_concurrency_safe(self, args: NoteInput) -> bool:
        return True

    async def call(self, args: NoteInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        return ToolOutput(content=f"noted: {args.text}")


WORKER = {"worker": {"description": "bench worker", "prompt": "You work.", "tools": ["Note"]}}


def fanout_script(n: int, k: int, latency_ms: int) -> dict[str, Any]:
    calls = [
        {
            "name": "Agent",
            "input": {"description": f"job {i}", "prompt": f"job {i}", "subagent_type": "worker"},
        }
        for i in range(n)
    ]
    child_turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "Note", "input": {"text": f"step {j}"}}], "delay_ms": latency_ms}
        for j in range(k - 1)
    ]
    child_turns.append({"text": "worker done: {{prompt}}", "delay_ms": latency_ms})
    return {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": calls, "delay_ms": latency_ms},
                    {"text": "all done", "delay_ms": latency_ms},
                ],
            },
            {"agent_type": "worker", "turns": child_turns},
        ]
    }


def chain_script(n: int, latency_ms: int) -> dict[str, Any]:
    main_turns: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {
                    "name": "Agent",
                    "input": {
                        "description": f"step {i}",
                        "prompt": f"step {i}",
                        "subagent_type": "worker",
                    },
                }
            ],
            "delay_ms": latency_ms,
        }
        for i in range(n)
    ]
    main_turns.append({"text": "chain done", "delay_ms": latency_ms})
    return {
        "agents": [
            {"agent_type": "main", "turns": main_turns},
            {
                "agent_type": "worker",
                "turns": [
                    {
                        "tool_calls": [{"name": "Note", "input": {"text": "x"}}],
                        "delay_ms": latency_ms,
                    },
                    {"text": "ok", "delay_ms": latency_ms},
                ],
            },
        ]
    }


def bench_dir() -> Path:
    """Where the runs' state goes: ``SUBAGENTS_BENCH_DIR``, else ``bench/.work`` in this checkout,
    marked so that each run's folder starts in a block group of its own (``spread_folders``).

    This VM's ``/`` is an ext4 *without a journal*, where the kernel will not reuse an inode
    freed in the last 60 s (360 s while its inode-table block is dirty) and every file create
    scans past each such inode, one buffer look-up apiece (``find_inode_bit`` ->
    ``recently_deleted``). Every bench run deletes its folder, so in a plain folder each create
    pays for the files the earlier runs deleted in the last minutes: the files floor of the
    same 50 x 10 read 23-114 µs per model call there against 14-26 µs with the folders spread,
    alternated in the same minutes (docs/performance.md, "Session 9: the floors")."""
    default = Path(__file__).resolve().parent / ".work"
    base = Path(os.environ.get("SUBAGENTS_BENCH_DIR", default))
    base.mkdir(parents=True, exist_ok=True)
    spread_folders(base)
    return base


FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_TOPDIR_FL = 0x80086601, 0x40086602, 0x00020000


def spread_folders(folder: Path) -> bool:
    """Give ``folder`` ext4's top-directory flag (``chattr +T``): the kernel then places each
    new folder in it like a folder of ``/``, in a block group with few folders and much free
    space, instead of next to its siblings. A run then creates its files where no earlier run
    has freed inodes in the last minutes (see ``bench_dir``), as a user's state folder that
    keeps its transcripts does; without the flag the figure and its floor measure how much
    the runs before them deleted. False where the file system has no such flag (tmpfs)."""
    import fcntl
    import struct

    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        flags = bytearray(4)
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags)
        (value,) = struct.unpack("I", flags)
        if not value & FS_TOPDIR_FL:
            fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("I", value | FS_TOPDIR_FL))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def settle() -> None:
    """Write back every dirty page before a measured run or a floor (outside its timing): a
    ``syncfs`` writes the whole file system's dirty metadata in the caller's own context
    (``sync_blockdev``), so without this a run pays for the deletions of the run before it,
    and the floor for the run's; ~1 ms of kernel CPU per ``syncfs`` with 10 files of its own,
    ~2.3 ms with 500 other unsynced files (docs/performance.md, "Session 9: the floors")."""
    os.sync()


SPENT = ".spent"
"""Where ``run_folder`` puts a finished run's folder (a rename frees no inode) until ``sweep``."""


@contextlib.contextmanager
def run_folder(prefix: str, base: Path | None = None) -> Iterator[Path]:
    """A fresh folder for one run in ``base`` (default ``bench_dir()``), moved aside into
    ``base/.spent`` when the run ends instead of deleted: on a journal-less ext4 every inode
    freed is skipped by each create of the next minutes (``bench_dir``), so a bench deletes
    nothing while it measures; ``sweep`` deletes the lot at the end of the script, or of
    ``table.py`` (which sets ``SUBAGENTS_BENCH_KEEP=1`` for the scripts it runs)."""
    base = base or bench_dir()
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    try:
        yield folder
    finally:
        spent = base / SPENT
        spent.mkdir(exist_ok=True)
        folder.rename(spent / folder.name)


def sweep(*bases: Path, force: bool = False) -> None:
    """Delete the folders ``run_folder`` set aside in ``bases`` (default ``bench_dir()``), unless
    ``SUBAGENTS_BENCH_KEEP`` says a caller (``table.py``) sweeps once at its own end."""
    if os.environ.get("SUBAGENTS_BENCH_KEEP") == "1" and not force:
        return
    for base in bases or (bench_dir(),):
        shutil.rmtree(base / SPENT, ignore_errors=True)


def describe_folder(folder: Path) -> str:
    """Which kind of file system the figures were measured on (it moves them; see README)."""
    from subagents.store.atomic import needs_sync

    if needs_sync(os.stat(folder).st_dev):
        kind = "disk-backed: file creation costs kernel CPU that varies by machine"
    else:
        kind = "RAM file system: no disk in the figures"
    return f"# state folder {folder} ({kind}; SUBAGENTS_BENCH_DIR chooses it)"


@dataclass
class Figures:
    workload: str
    latency_ms: int
    model_calls: int
    cpu_s: float
    kernel_s: float
    """The part of ``cpu_s`` spent in the kernel (file system, wake-ups)."""
    wall_s: float
    ideal_s: float
    peak_rss_mb: float
    baseline_cpu_s: float
    run_us: list[float]
    """CPU µs per model call of each measured run (the spread behind the mean)."""
    files_floor_us: list[float]
    """The files' floor (``files_floor``) per model call of each run; empty without sidecars."""
    python_floor_us: list[float] = field(default_factory=list)
    """The Python floor (``python_floor.floor_once``: SPEC's work per call and per child in
    straight-line code) per model call, one after each run; empty without sidecars."""

    @property
    def cpu_us_per_call(self) -> float:
        return self.cpu_s / self.model_calls * 1e6

    @property
    def baseline_us_per_call(self) -> float:
        return self.baseline_cpu_s / self.model_calls * 1e6

    @property
    def wall_over_ideal(self) -> float:
        return self.wall_s / self.ideal_s if self.ideal_s else float("nan")

    def row(self) -> str:
        ratio = f"{self.wall_over_ideal:6.3f}" if self.ideal_s else "   n/a"
        return (
            f"{self.workload:11} L={self.latency_ms:>3} ms  calls={self.model_calls:>4}  "
            f"cpu/call={self.cpu_us_per_call:6.1f} µs  "
            f"(kernel {self.kernel_s / self.model_calls * 1e6:5.1f}; bare asyncio "
            f"{self.baseline_us_per_call:5.1f}, net "
            f"{self.cpu_us_per_call - self.baseline_us_per_call:5.1f})  "
            f"wall={self.wall_s * 1000:7.1f} ms  "
            f"wall/ideal={ratio}  peak RSS={self.peak_rss_mb:6.1f} MB  "
            f"runs {min(self.run_us):.0f}-{max(self.run_us):.0f} µs"
            + (
                f"  files floor {median(self.files_floor_us):.0f} µs "
                f"({min(self.files_floor_us):.0f}-{max(self.files_floor_us):.0f})"
                if self.files_floor_us
                else ""
            )
            + (
                f"  python floor {median(self.python_floor_us):.0f} µs "
                f"({min(self.python_floor_us):.0f}-{max(self.python_floor_us):.0f})"
                if self.python_floor_us
                else ""
            )
        )


DURABILITY = {"full": (True, True), "transcripts": (True, False), "off": (False, False)}
"""--durability: (transcripts, sidecars). ``full`` is the default configuration."""
durability = "full"
freeze_gc = True
observer: Any = None
"""--telemetry: the ``Telemetry`` every session gets (None: off)."""

RECEIVER = (
    "import sys\n"
    "from subagents.testing.otlp_receiver import OTLPReceiver\n"
    "with OTLPReceiver() as receiver:\n"
    "    print(receiver.endpoint, flush=True)\n"
    "    sys.stdin.read()\n"
)


def telemetry_for(mode: str) -> Any:
    """The observer of ``--telemetry mode`` (imports OpenTelemetry only when asked)."""
    if mode == "off":
        return None
    import subprocess

    from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from subagents.telemetry import Telemetry

    tracer_provider = TracerProvider()
    if mode == "memory":
        tracer_provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
        meter_provider = MeterProvider(
            metric_readers=[InMemoryMetricReader()], exemplar_filter=AlwaysOffExemplarFilter()
        )
        return Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    receiver = subprocess.Popen(
        [sys.executable, "-c", RECEIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert receiver.stdout is not None
    endpoint = receiver.stdout.readline().strip()
    spans = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")
    tracer_provider.add_span_processor(BatchSpanProcessor(spans))
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{endpoint}/v1/metrics"))
    meter_provider = MeterProvider(
        metric_readers=[reader], exemplar_filter=AlwaysOffExemplarFilter()
    )
    return Telemetry(
        tracer_provider=tracer_provider, meter_provider=meter_provider, flush_at_session_end=True
    )


def prepare(script: dict[str, Any], workdir: Path) -> tuple[ScriptedModel, DefinitionSet]:
    """What a session is given before its clock starts: its scripted model and definitions."""
    definitions = load_definitions(
        cwd=workdir, home=workdir, subagents_home=workdir / "home", cli_agents=json.dumps(WORKER)
    )
    return ScriptedModel.from_dict(script, keep_requests=False), definitions


async def run_once(
    script: dict[str, Any], workdir: Path, config: RuntimeConfig
) -> tuple[int, float, float, float]:
    """(model calls, CPU seconds, wall seconds, kernel CPU seconds) of one session."""
    return await run_prepared(*prepare(script, workdir), workdir, config)


async def run_prepared(
    model: ScriptedModel, definitions: DefinitionSet, workdir: Path, config: RuntimeConfig
) -> tuple[int, float, float, float]:
    """``run_once`` with the model and definitions made beforehand (``prepare``)."""
    session = Session(
        SessionOptions(
            model=model,
            cwd=workdir,
            home=workdir / "home",
            tool_names=["Agent"],  # the built-in Agent tool, and the bench's own tool
            extra_tools=[NoteTool()],
            definitions=definitions,
            config=config,
            transcripts=DURABILITY[durability][0],
            sidecars=DURABILITY[durability][1],
            observer=observer,
        )
    )
    cpu0, kernel0, wall0 = time.process_time(), os.times().system, time.perf_counter()
    result = await session.run("bench")
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    kernel = os.times().system - kernel0
    if result.is_error:
        raise RuntimeError(f"bench run failed: {result.result}")
    calls = sum(run.stats.num_turns for run in result.agents)
    return calls, cpu, wall, kernel


async def bare_fanout(n: int, k: int, width: int, latency_s: float) -> None:
    """The fanout's awaits with no runtime: a coordinator sleep, N children of K sleeps
    (``width`` at a time), a final sleep."""
    gate = asyncio.Semaphore(width)

    async def child() -> None:
        async with gate:
            for _ in range(k):
                await asyncio.sleep(latency_s)

    await asyncio.sleep(latency_s)
    await asyncio.gather(*(child() for _ in range(n)))
    await asyncio.sleep(latency_s)


async def bare_chain(n: int, latency_s: float) -> None:
    for _ in range(3 * n + 1):
        await asyncio.sleep(latency_s)


def baseline_cpu(workload: str, latency_ms: int, n: int, k: int, width: int) -> float:
    latency = latency_ms / 1000
    coro = bare_chain(n, latency) if workload == "chain" else bare_fanout(n, k, width, latency)
    start = time.process_time()
    asyncio.run(coro)
    return time.process_time() - start


RECORD = b"x" * 3000
"""About a sidecar record's size on the fan-out (2.9-3.0 KB)."""
LINE = b"y" * 330
"""About one turn's transcript write on the fan-out (a message line and the turn marker)."""


SPARES = 64
"""Spare record files a floor keeps per folder, as ``store.files.SPARE_LIMIT``."""


def _child_files(folder: str, index: int, turns: int, spares: list[str]) -> int:
    """A child's transcript (created, one append per turn, still open) and its ``running``
    sidecar (a spare or a new temp file, renamed; the marker linked): the system calls the
    runtime makes (strace)."""
    transcript = os.open(
        f"{folder}/{index}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600
    )
    for _ in range(turns):
        os.write(transcript, LINE)
    _record(folder, index, 0, spares)
    os.link(f"{folder}/r{index}.json", f"{folder}/.running/{index}")
    return transcript


def _record(
    folder: str, index: int | str, version: int, spares: list[str], data: bytes = RECORD
) -> None:
    """One owner write of a sidecar: a spare file (``fstat``) overwritten in place and cut to
    the record's length, or a new ``O_EXCL`` temp file written; ``fstat``, rename over the
    record. In place, as ``store.atomic.stage_write`` does, not emptied first: on this VM's ext4
    (no journal, ``discard``) ``ftruncate(0)`` frees the block with a synchronous discard and
    marks the file for a forced write-back at ``close`` (``auto_da_alloc``), and a floor is the
    cheapest way known (docs/performance.md, "Session 9: the floors")."""
    if spares:
        temp = spares.pop()
        fd = os.open(temp, os.O_WRONLY | os.O_NOFOLLOW)
        os.fstat(fd)
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    else:
        temp = f"{folder}/.r{index}.{version}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.write(fd, data)
    os.fstat(fd)
    os.close(fd)
    os.rename(temp, f"{folder}/r{index}.json")


def _retire_marker(folder: str, index: int | str, spares: list[str]) -> None:
    """The finished child's marker still names its first record's inode: kept as a spare for a
    later write (``store.files._retire_marker``), removed past ``SPARES``."""
    marker = f"{folder}/.running/{index}"
    if len(spares) >= SPARES:
        os.unlink(marker)
        return
    spare = f"{folder}/.spare/{index}"
    os.rename(marker, spare)
    spares.append(spare)


def files_floor(n: int, k: int, width: int, base: Path | None = None) -> float:
    """CPU seconds of the files a fan-out's children write, with no runtime: per child one
    transcript (create, ``k`` appends) and two sidecar writes (started, finished: each a spare
    file rewritten or a new temp file, renamed over the record) with the running marker linked
    and then kept as a spare; per wave of ``width`` children two ``syncfs`` (the commit pipeline's
    rounds) and a directory ``fsync``. What SPEC §9 makes any durable runtime do — a transcript
    per child, a line per turn, a record replaced atomically at each state change — with the
    fewest creates and frees known (the runtime's spares: an inode freed on a journal-less ext4
    slows each later create, ``bench_dir``) and none of the runtime's own work. Done in a fresh
    folder of the state folder ``base`` (default ``bench_dir()``), as each measured run is,
    after ``settle``."""
    from subagents.store.atomic import syncfs_once

    with run_folder("floor-", base) as tmp:
        folder = f"{tmp}/agents"
        settle()
        start = time.process_time()
        os.makedirs(f"{folder}/.running")
        os.makedirs(f"{folder}/.spare")
        directory = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        spares: list[str] = []
        for first in range(0, n, width):
            wave = range(first, min(n, first + width))
            opened = [_child_files(folder, index, k, spares) for index in wave]
            syncfs_once(directory) or os.fsync(directory)
            for index, transcript in zip(wave, opened, strict=True):
                _record(folder, index, 1, spares)
                _retire_marker(folder, index, spares)
                os.close(transcript)
            syncfs_once(directory) or os.fsync(directory)
            os.fsync(directory)
        os.close(directory)
        return time.process_time() - start


def workload_of(
    workload: str, latency_ms: int, n: int, k: int
) -> tuple[dict[str, Any], float, RuntimeConfig]:
    """A workload's script, its ideal critical path (s) and its configuration."""
    width = n if workload == "fanout-wide" else 10
    config = RuntimeConfig(tool_concurrency=width, max_concurrent_subagents=max(20, width))
    if workload.startswith("fanout"):
        waves = -(-n // width)
        return fanout_script(n, k, latency_ms), (waves * k + 2) * latency_ms / 1000, config
    return chain_script(n, latency_ms), (3 * n + 1) * latency_ms / 1000, config


def measure(workload: str, latency_ms: int, n: int, k: int, runs: int = 5) -> Figures:
    """One warm-up run, then ``runs`` measured runs, each in a fresh project folder of its own
    (so each session starts like a first run, with no earlier records to reconcile). CPU is
    totalled over the measured runs — the mean per model call, so the occasional garbage
    collection a run triggers is counted, not dodged by picking a lucky run."""
    from python_floor import floor_once  # it imports this module

    script, ideal, config = workload_of(workload, latency_ms, n, k)
    width = config.tool_concurrency
    base = bench_dir()
    per_run: list[tuple[int, float, float, float]] = []
    floor: list[float] = []
    python_floor: list[float] = []
    with_floor = DURABILITY[durability][1] and workload.startswith("fanout")
    for index in range(runs + 1):
        with run_folder("run-", base) as tmp:
            settle()
            figures = asyncio.run(run_once(script, tmp, config))
        if index:
            per_run.append(figures)
            if with_floor:  # one floor after each run: the same minutes, the same disk state
                floor.append(files_floor(n, k, width, base) / figures[0] * 1e6)
                python_floor.append(floor_once("fanout", n, k, latency_ms, width, base))
        elif freeze_gc:
            # After the warm-up (imports done), as the CLI does before its run (cli/main.py):
            # the import-time heap is kept out of later full collections.
            gc.freeze()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    baseline = baseline_cpu(workload, latency_ms, n, k, width)
    calls = sum(c for c, _, _, _ in per_run)
    return Figures(
        workload,
        latency_ms,
        calls // runs,
        cpu_s=sum(cpu for _, cpu, _, _ in per_run) / runs,
        kernel_s=sum(kernel for _, _, _, kernel in per_run) / runs,
        wall_s=sum(wall for _, _, wall, _ in per_run) / runs,
        ideal_s=ideal,
        peak_rss_mb=rss_mb,
        baseline_cpu_s=baseline,
        run_us=[cpu / c * 1e6 for c, cpu, _, _ in per_run],
        files_floor_us=floor,
        python_floor_us=python_floor,
    )


def count_calls(workload: str, n: int, k: int) -> str:
    """Python function calls per model call of one run after a warm-up (``--count-calls``):
    a figure load cannot move, for telling whether a change added work to the hot path."""
    import cProfile
    import pstats

    script, _, config = workload_of(workload, 0, n, k)
    counts: list[tuple[int, int]] = []
    for index in range(3):  # a warm-up (imports, caches), then two counted runs
        profile = cProfile.Profile()
        with run_folder("run-") as tmp:
            profile.enable()
            model_calls = asyncio.run(run_once(script, tmp, config))[0]
            profile.disable()
        if index:
            # ``pstats`` keys functions by (file, line, name): every dataclass's generated
            # ``__init__`` is ("<string>", 2, "__init__") and all but one drop out of its total.
            # The raw entries count each code object: the figure beside it.
            every = sum(entry.callcount for entry in profile.getstats())
            counts.append((pstats.Stats(profile).total_calls, every, model_calls))
    per_call = "  ".join(
        f"{calls / model_calls:.1f} ({calls}; every code object {every / model_calls:.1f})"
        for calls, every, model_calls in counts
    )
    return f"{workload:10s}  model calls={counts[0][2]}  Python calls per model call: {per_call}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workload", choices=("fanout", "fanout-wide", "chain", "all"), default="all"
    )
    parser.add_argument("--latency", type=int, action="append", help="ms; repeatable")
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5, help="measured runs (after a warm-up)")
    parser.add_argument(
        "--no-gc-freeze",
        action="store_true",
        help="leave the import-time heap in garbage collection (the CLI freezes it)",
    )
    parser.add_argument(
        "--library",
        action="store_true",
        help="as a library user runs it: no gc.freeze by the caller, full durability",
    )
    parser.add_argument("--json", action="store_true", help="print figures as JSON lines")
    parser.add_argument(
        "--telemetry",
        choices=("off", "memory", "otlp"),
        default="off",
        help="OpenTelemetry off (default), into memory, or exported over OTLP/HTTP",
    )
    parser.add_argument(
        "--count-calls",
        action="store_true",
        help="print Python function calls per model call (cProfile's count, not a timing)",
    )
    parser.add_argument(
        "--durability",
        choices=tuple(DURABILITY),
        default="full",
        help="full (default: transcripts and sidecars), transcripts only, or off",
    )
    args = parser.parse_args(argv)
    global durability, freeze_gc, observer
    durability = "full" if args.library else args.durability
    freeze_gc = not (args.no_gc_freeze or args.library)
    observer = telemetry_for(args.telemetry)
    workloads = ["fanout", "fanout-wide", "chain"] if args.workload == "all" else [args.workload]
    if not args.json:
        print(describe_folder(bench_dir()))
        print(f"# telemetry: {args.telemetry}")
    if args.count_calls:
        for workload in workloads:
            print(count_calls(workload, args.n, args.k))
        return 0
    for workload in workloads:
        for latency in args.latency or [0, 20]:
            figures = measure(workload, latency, args.n, args.k, args.runs)
            if args.json:
                print(
                    json.dumps(
                        {
                            **figures.__dict__,
                            "cpu_us_per_call": figures.cpu_us_per_call,
                            "wall_over_ideal": figures.wall_over_ideal,
                        }
                    )
                )
            else:
                print(figures.row())
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    try:
        code = main()
    finally:
        sweep()
    sys.exit(code)
