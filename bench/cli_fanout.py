"""CLI fan-out through real tools: ``subagents -p`` as a user runs it, children doing ``Read``.

Each run is one real CLI process (``python -m subagents -p ... --model scripted:FILE
--output-format json``) in a fresh folder: a small git project with ``--tree`` files of a few
lines each three folders deep (``src/pkg<d>/mod/file<i>.py``), ``SUBAGENTS_HOME`` and ``HOME``
beside it. The scripted coordinator delegates N ``general-purpose`` children in one turn; each
child makes K model calls: K-1 turns of one ``Read`` of a small file (a different file per call,
the files shared across children), then its answer. Model calls: 2 + N*K (502 at 50 x 10).

CPU is the process's and its children's (``wait4`` rusage: user + system). The CLI runs with
its bytecode cached (``PYTHONPYCACHEPREFIX`` in ``bench/.work``), as an installed package has it,
and its dataclass codegen cache kept from run to run (``CODEGEN_CACHE``), as a user's is.
Start-up is reported apart, not in the per-call figure: a three-line wrapper around the CLI's
``main`` notes the process's CPU (its own and its finished children's: ``git status``) when the
first model request arrives, and the per-call figure is ``(CPU of the run - CPU to the first
request) / (model calls - 1)``: what each model call of the run adds, the shutdown included.

Floors measured in the same run:

* ``no tools``: the same CLI fan-out whose children call a tool that does not exist (the loop
  answers "No such tool available" without running anything): the CLI, loop, scripted model,
  transcripts and sidecars per call, no tool execution;
* ``raw reads``: a bare Python loop doing what the Reads read — ``open``/``read``/``close`` by
  path of the same files the same number of times — per model call of the fan-out;
* ``files``: the children's durable files (``bench.files_floor``: transcript, records, markers,
  the syncs of each wave of 10) done by a bare loop in the same state folder after each run.

Run: ``python bench/cli_fanout.py`` (ext4 under ``bench/.work``, a journaled ext4 loop-mounted
there when run as root — see ``JOURNALED`` — and tmpfs under ``/dev/shm``), ``--fs ext4`` /
``--fs ext4-journal`` / ``--fs tmpfs`` for one, ``--json`` for table.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import files_floor, run_folder, settle, spread_folders, sweep

HERE = Path(__file__).resolve().parent
FOLDERS = {"ext4": HERE / ".work", "tmpfs": Path("/dev/shm/sb-cli")}
FILE_TEXT = "".join(f"line {n}: some text of a small source file\n" for n in range(1, 21))


def tree_files(count: int) -> list[str]:
    """Relative paths of the small files the children read (ten per folder)."""
    return [f"src/pkg{i // 10}/mod/file{i}.py" for i in range(count)]


def make_project(folder: Path, files: list[str]) -> Path:
    project = folder / "project"
    for rel in files:
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(FILE_TEXT)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return project


def fanout_script(n: int, k: int, files: list[str], tool: str) -> dict[str, Any]:
    calls = [
        {
            "name": "Agent",
            "input": {
                "description": f"job {i}",
                "prompt": f"job {i}",
                "subagent_type": "general-purpose",
            },
        }
        for i in range(n)
    ]
    children = []
    for i in range(n):
        turns: list[dict[str, Any]] = [
            {"tool_calls": [{"name": tool, "input": {"file_path": files[(i + j) % len(files)]}}]}
            for j in range(k - 1)
        ]
        turns.append({"text": f"job {i} done"})
        children.append({"agent_type": "general-purpose", "match": f"^job {i}$", "turns": turns})
    main = {"agent_type": "main", "turns": [{"tool_calls": calls}, {"text": "all done"}]}
    return {"agents": [main, *children]}


WRAPPER = (
    "import atexit, cProfile, os, pstats, resource, sys\n"
    "try:\n"
    "    from subagents.cli.entry import exit_with, prepare_exit\n"
    "except ImportError:  # a tree before cli/entry.py (A/B through PYTHONPATH)\n"
    "    exit_with, prepare_exit = sys.exit, lambda: None\n"
    "prepare_exit()\n"
    "NOTE, COUNT = sys.argv.pop(1), os.environ.pop('CLI_FANOUT_COUNT', '')\n"
    "from subagents.models.scripted import ScriptedModel\n"
    "_respond = ScriptedModel.respond\n"
    "def cpu(who):\n"
    "    usage = resource.getrusage(who)\n"
    "    return usage.ru_utime + usage.ru_stime\n"
    "def count(profile):\n"
    "    profile.disable()\n"
    "    profile.dump_stats(COUNT + '.prof')\n"
    "    open(COUNT, 'w').write(repr(pstats.Stats(profile).total_calls))\n"
    "first = []\n"
    "async def respond(self, request):\n"
    "    if not first:\n"
    "        first.append(cpu(resource.RUSAGE_SELF) + cpu(resource.RUSAGE_CHILDREN))\n"
    "        open(NOTE, 'w').write(repr(first[0]))\n"
    "        if COUNT:\n"
    "            profile = cProfile.Profile()\n"
    "            atexit.register(count, profile)\n"
    "            profile.enable()\n"
    "    return await _respond(self, request)\n"
    "ScriptedModel.respond = respond\n"
    "from subagents.cli.main import main\n"
    "exit_with(main())\n"
)
"""Runs the CLI as ``python -m subagents`` does (``cli/entry.run``: ``main``, then its exit),
noting the CPU at the first model request (and, with ``CLI_FANOUT_COUNT``, counting Python calls
from there to the exit)."""


def run_cli(
    folder: Path, project: Path, script: dict[str, Any], count_to: Path | None = None
) -> tuple[float, float, dict[str, Any]]:
    """(CPU seconds of the whole CLI run, CPU seconds to its first model request, its JSON
    result) of one run; CPU of the process and its children."""
    script_path = folder / "script.json"
    script_path.write_text(json.dumps(script))
    home = folder / "home"
    home.mkdir(exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "SUBAGENTS_MODEL")
    }
    # Bytecode cached as an installed package has it (bench/startup.py): otherwise every run
    # compiles every module first, and that noise (±0.3 s) would swamp the per-call figure.
    env["PYTHONPYCACHEPREFIX"] = str(HERE / ".work" / "pycache")
    env.update(SUBAGENTS_HOME=str(home / ".subagents"), HOME=str(home))
    cache = home / ".subagents" / "cache"
    _carry_codegen_cache(CODEGEN_CACHE, cache)
    if count_to is not None:
        env["CLI_FANOUT_COUNT"] = str(count_to)
    note = folder / "first-request"
    command = [sys.executable, "-c", WRAPPER, str(note), "-p", "go"]
    command += ["--model", f"scripted:{script_path}", "--output-format", "json"]
    command += ["--cwd", str(project)]
    out, err = folder / "stdout", folder / "stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(command, env=env, cwd=project, stdout=stdout, stderr=stderr)
        _pid, status, usage = os.wait4(process.pid, 0)
    _carry_codegen_cache(cache, CODEGEN_CACHE)
    process.returncode = code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"the CLI failed ({code}): {err.read_text()[-2000:]}")
    result: dict[str, Any] = json.loads(out.read_text())
    if result.get("is_error"):
        raise RuntimeError(f"the run ended in error: {result.get('result')}")
    cpu = usage.ru_utime + usage.ru_stime
    return cpu, float(note.read_text()), result


CODEGEN_CACHE = HERE / ".work" / "codegen-cache"
"""The CLI's dataclass codegen cache (``cli/codegen_cache.py``), kept across runs as a user's
``~/.subagents/cache`` is: each run's ``SUBAGENTS_HOME`` is fresh, and a cold cache would make
every run compile and write it again (~5 ms at its exit, in the per-call figure)."""


def _carry_codegen_cache(source: Path, target: Path) -> None:
    for path in source.glob("codegen-*.marshal"):
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copy2(path, target / path.name)


def raw_reads(project: Path, paths: list[str]) -> float:
    """CPU seconds of a bare loop opening, reading and closing each path by name."""
    start = time.process_time()
    for rel in paths:
        with open(project / rel, "rb") as handle:
            handle.read()
    return time.process_time() - start


@dataclass
class Figures:
    fs: str
    folder: str
    model_calls: int
    reads: int
    run_us: list[float] = field(default_factory=list)
    """CPU µs per model call of each measured fan-out run (start-up taken out)."""
    no_tool_us: list[float] = field(default_factory=list)
    startup_ms: list[float] = field(default_factory=list)
    """CPU to the first model request of each measured fan-out run."""
    raw_read_us: list[float] = field(default_factory=list)
    """The raw-reads floor per model call of the fan-out."""
    files_floor_us: list[float] = field(default_factory=list)
    """The children's durable files done by a bare loop (``bench.files_floor``), per model call."""

    @staticmethod
    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    def row(self) -> str:
        def cell(values: list[float]) -> str:
            return f"{self.mean(values):6.1f} ({min(values):.0f}-{max(values):.0f})"

        return (
            f"{self.fs:5} calls={self.model_calls} Reads={self.reads}  "
            f"CPU/model call {cell(self.run_us)} µs  floors: no tools {cell(self.no_tool_us)} "
            f"µs, raw reads {cell(self.raw_read_us)} µs, files {cell(self.files_floor_us)} µs  "
            f"start-up (to 1st request) {cell(self.startup_ms)} ms"
        )


def measure(fs: str, base: Path, n: int, k: int, tree: int, runs: int) -> Figures:
    files = tree_files(tree)
    read_script = fanout_script(n, k, files, "Read")
    no_tool_script = fanout_script(n, k, files, "NoSuchTool")
    paths = [files[(i + j) % len(files)] for i in range(n) for j in range(k - 1)]
    calls = 2 + n * k
    figures = Figures(fs, str(base), calls, len(paths))
    base.mkdir(parents=True, exist_ok=True)
    spread_folders(base)  # each run's folder in a block group of its own (bench.bench_dir)
    for index in range(runs + 1):
        measured: dict[str, tuple[float, float]] = {}
        for name, script in (("read", read_script), ("none", no_tool_script)):
            with run_folder("cli-", base) as folder:
                project = make_project(folder, files)
                settle()
                cpu, first, result = run_cli(folder, project, script)
                _check(result, n, k, name == "read")
                measured[name] = (cpu, first)
                if name == "read":
                    raw = raw_reads(project, paths)
        if not index:
            continue  # warm-up: the page cache, the bytecode cache
        (cpu, first), (none_cpu, none_first) = measured["read"], measured["none"]
        figures.startup_ms.append(first * 1e3)
        figures.run_us.append((cpu - first) / (calls - 1) * 1e6)
        figures.no_tool_us.append((none_cpu - none_first) / (calls - 1) * 1e6)
        figures.raw_read_us.append(raw / calls * 1e6)
        # The children's durable files done bare, in the same state folder, waves of 10 (the
        # default tool concurrency the fan-out runs at).
        figures.files_floor_us.append(files_floor(n, k, 10, base) / calls * 1e6)
    return figures


def count_calls(base: Path, n: int, k: int, tree: int) -> str:
    """Python function calls per model call after the first request (cProfile's count, which
    load cannot move), Read fan-out and the no-tool floor, one run each after a warm-up."""
    files = tree_files(tree)
    counts = []
    for tool in ("Read", "NoSuchTool", "Read"):
        folder = Path(tempfile.mkdtemp(prefix="cli-", dir=base))
        try:
            project = make_project(folder, files)
            note = folder / "calls"
            run_cli(folder, project, fanout_script(n, k, files, tool), count_to=note)
            counts.append(int(note.read_text()) / (2 + n * k - 1))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return f"Python calls per model call: Read fan-out {counts[2]:.1f}; no tools {counts[1]:.1f}"


def _check(result: dict[str, Any], n: int, k: int, reads: bool) -> None:
    """The run did what it claims: N children, each with K-1 tool uses (the Reads found
    their files: the coordinator's tool results hold no error)."""
    children = [a for a in result["agents"] if a.get("agentType") == "general-purpose"]
    uses = sum(a.get("totalToolUseCount", 0) for a in children)
    if len(children) != n or (reads and uses != n * (k - 1)):
        raise RuntimeError(f"expected {n} children with {n * (k - 1)} Reads: {result['agents']}")


JOURNALED = HERE / ".work" / "ext4-journal"
"""Where ``--fs ext4-journal`` mounts a fresh ext4 *with* a journal (``mkfs.ext4`` defaults,
a 2 GB sparse image, loop-mounted): an ordinary disk. This VM's ``/`` is an ext4 without a
journal, where the kernel will not reuse an inode freed in the last minutes and every create
scans past each such inode (``recently_deleted``): in a folder that has seen churn (this
bench's own runs, test suites) a create costs 200-600 µs of the process's CPU instead of ~20
(docs/performance.md, "Session 6")."""


def mount_journaled() -> Path | None:
    """The mounted journaled ext4's folder for runs, or None (with a note on stderr) where one
    cannot be made here: not root, no ``mkfs.ext4``, no loop device."""
    image = JOURNALED.with_suffix(".img")
    if os.geteuid() != 0 or shutil.which("mkfs.ext4") is None:
        print("cli_fanout: ext4-journal needs root and mkfs.ext4; skipped", file=sys.stderr)
        return None
    try:
        JOURNALED.mkdir(parents=True, exist_ok=True)
        with image.open("wb") as handle:
            handle.truncate(2 << 30)
        subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
        mount = ["mount", "-o", "loop", str(image), str(JOURNALED)]
        subprocess.run(mount, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"cli_fanout: ext4-journal could not be mounted ({exc}); skipped", file=sys.stderr)
        image.unlink(missing_ok=True)
        return None
    return JOURNALED / "runs"


def unmount_journaled() -> None:
    subprocess.run(["umount", str(JOURNALED)], capture_output=True)
    JOURNALED.with_suffix(".img").unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--fs",
        choices=("ext4", "ext4-journal", "tmpfs", "both", "all"),
        default="all",
        help="both: ext4 and tmpfs; all: also a journaled ext4 where root can mount one",
    )
    parser.add_argument("--dir", type=Path, help="state and files here instead (one --fs)")
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--tree", type=int, default=100, help="small files in the project")
    parser.add_argument("--runs", type=int, default=3, help="measured runs (after a warm-up)")
    parser.add_argument("--json", action="store_true", help="print figures as JSON lines")
    parser.add_argument(
        "--count-calls",
        action="store_true",
        help="print Python calls per model call (cProfile's count, not a timing)",
    )
    args = parser.parse_args(argv)
    if args.count_calls:
        base = args.dir or FOLDERS["tmpfs" if args.fs == "tmpfs" else "ext4"]
        base.mkdir(parents=True, exist_ok=True)
        print(count_calls(base, args.n, args.k, args.tree))
        return 0
    kinds = {"both": ("ext4", "tmpfs"), "all": ("ext4", "ext4-journal", "tmpfs")}
    for fs in kinds.get(args.fs, (args.fs,)):
        if fs == "ext4-journal" and args.dir is None:
            base = mount_journaled()
            if base is None:
                continue
            try:
                figures = measure(fs, base, args.n, args.k, args.tree, args.runs)
            finally:
                unmount_journaled()
        else:
            base = args.dir or FOLDERS[fs]
            figures = measure(fs, base, args.n, args.k, args.tree, args.runs)
        if args.json:
            print(json.dumps({**figures.__dict__, "cpu_us_per_call": figures.mean(figures.run_us)}))
        else:
            print(figures.row(), f"[{os.getloadavg()[0]:.1f} load]", flush=True)
    return 0


if __name__ == "__main__":
    try:
        code = main()
    finally:
        sweep(*FOLDERS.values())
    sys.exit(code)
