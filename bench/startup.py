"""Start-up of ``subagents -p``: CPU from process start to the first model request.

Two paths, each a one-turn answer in a fresh project folder:

* ``anthropic`` — ``ANTHROPIC_API_KEY`` set and ``ANTHROPIC_BASE_URL`` pointing at the replay
  server (``replay_server.py``, run here on a thread). When the request's head arrives the server
  reads the child's CPU (user + system, all threads, ``/proc/PID/task/*/schedstat``, ns): that
  is the figure — measured by the other end of the socket, so nothing in the child is changed.
* ``scripted`` — ``--model scripted:FILE``. There is no socket, so the child is the ``subagents``
  entry point run under a small wrapper that notes ``time.process_time()`` when the scripted
  model is first asked (patched by an import hook when the CLI imports it, so the child imports
  exactly what a real run does, in the same order).

Beside them: the whole run's CPU (``wait4`` rusage, exit included) and wall time, and the floors
— the interpreter alone (``python -c pass``) and the interpreter with what any asyncio HTTP
client imports (``asyncio``, ``ssl``, ``json``). Reported: mean and range over ``--runs``.

Bytecode: the children run with ``PYTHONPYCACHEPREFIX`` in the bench folder and without
``PYTHONDONTWRITEBYTECODE``, so after the warm-up run every module loads from cached bytecode,
as from an installed package (pip compiles at install). This workspace sets
``PYTHONDONTWRITEBYTECODE=1``, under which every run recompiles every module first; the
``no bytecode`` row shows that cost (with the dataclass codegen cache off too,
``cli/codegen_cache.py``, which the other rows keep in the bench folder's ``SUBAGENTS_HOME``).

Run: ``python bench/startup.py [--runs 10] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import bench_dir
from replay_server import FanoutScenario, ReplayServer

SCRIPT = {"agents": [{"turns": [{"text": "hello"}]}]}
WRAPPER = (
    "import sys, time\n"
    "from importlib.machinery import PathFinder\n"
    "NOTE = sys.argv.pop(1)\n"
    "def patch(module):\n"
    "    respond = module.ScriptedModel.respond\n"
    "    async def noted(self, request):\n"
    "        if not getattr(module.ScriptedModel, '_noted', False):\n"
    "            module.ScriptedModel._noted = True\n"
    "            open(NOTE, 'w').write(repr(time.process_time()))\n"
    "        return await respond(self, request)\n"
    "    module.ScriptedModel.respond = noted\n"
    "class Hook:\n"
    "    def find_spec(self, name, path, target=None):\n"
    "        if name != 'subagents.models.scripted':\n"
    "            return None\n"
    "        sys.meta_path.remove(self)\n"
    "        spec = PathFinder.find_spec(name, path)\n"
    "        run = spec.loader.exec_module\n"
    "        spec.loader.exec_module = lambda module: (run(module), patch(module))\n"
    "        return spec\n"
    "sys.meta_path.insert(0, Hook())\n"
    "try:\n"
    "    from subagents.cli.entry import exit_with, prepare_exit\n"
    "except ImportError:  # a tree from before cli/entry.py\n"
    "    exit_with, prepare_exit = sys.exit, lambda: None\n"
    "prepare_exit()\n"
    "from subagents.cli.main import main\n"
    "exit_with(main())\n"
)
"""Runs ``subagents`` as its entry point does, noting the CPU when the scripted model is first
asked. The patch is applied when the CLI itself imports the scripted model (an import hook):
importing it first would import the runtime before ``main()`` sets the process up (the codegen
cache, pydantic's plugin answer, the collector), which a real run never does."""


@dataclass
class Figures:
    path: str
    to_first_request_ms: list[float]
    run_cpu_ms: list[float]
    wall_ms: list[float]

    def line(self) -> str:
        def show(values: list[float]) -> str:
            if not values:
                return "      -"
            return f"{statistics.mean(values):6.0f} ({min(values):.0f}-{max(values):.0f})"

        return (
            f"{self.path:28} CPU to first request {show(self.to_first_request_ms)} ms   "
            f"whole run CPU {show(self.run_cpu_ms)} ms   wall {show(self.wall_ms)} ms"
        )


class ServerThread:
    """The replay server on its own thread and loop, answering every request with text."""

    def __init__(self) -> None:
        self.server = ReplayServer(scenario=FanoutScenario(n=0, k=1))
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self.thread.start()
        started.wait(10)

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.start())
        started.set()
        self.loop.run_forever()


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a measured child: bytecode cached (module docstring)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.pop("SUBAGENTS_MODEL", None)
    env["PYTHONPYCACHEPREFIX"] = str(bench_dir() / "pycache")
    env["SUBAGENTS_HOME"] = str(bench_dir() / "home")  # its codegen cache, like the pycache
    return {**env, **extra}


def run_child(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(whole-run CPU ms, wall ms) of one child, from its rusage."""
    wall0 = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(process.pid, 0)
    wall = (time.perf_counter() - wall0) * 1000
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{command[:3]} exited with {process.returncode}")
    return (usage.ru_utime + usage.ru_stime) * 1000, wall


def measure_anthropic(server: ServerThread, runs: int, folder: Path) -> Figures:
    env = child_env(ANTHROPIC_API_KEY="bench", ANTHROPIC_BASE_URL=server.server.url)
    figures = Figures("subagents -p (anthropic)", [], [], [])
    for index in range(runs + 1):
        before = len(server.server.arrivals)
        wall0 = time.perf_counter()
        process = subprocess.Popen(
            [_entry(), "-p", "hi", "--cwd", str(folder)], env=env, stdout=subprocess.DEVNULL
        )
        server.server.watch(process.pid)
        _pid, status, usage = os.wait4(process.pid, 0)
        wall = (time.perf_counter() - wall0) * 1000
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError("subagents -p exited with an error")
        first = server.server.arrivals[before]
        if index and first.client_cpu_ns is not None:
            figures.to_first_request_ms.append(first.client_cpu_ns / 1e6)
            figures.run_cpu_ms.append((usage.ru_utime + usage.ru_stime) * 1000)
            figures.wall_ms.append(wall)
    return figures


def measure_scripted(runs: int, folder: Path, *, bytecode: bool = True) -> Figures:
    script = folder / "one-turn.json"
    script.write_text(json.dumps(SCRIPT))
    label = "subagents -p (scripted)" if bytecode else "  same, no bytecode cache"
    env = child_env()
    if not bytecode:  # neither module bytecode nor the dataclass codegen cache
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "SUBAGENTS_CODEGEN_CACHE": "0"}
        # From a copy of the package without its __pycache__: PYTHONDONTWRITEBYTECODE stops
        # writes, not reads, so a checkout whose tests had run read its cached bytecode here
        # (a tree after CI: 256 ms against 430 for a fresh clone of the same code, 2026-12-02).
        path = [str(_package_copy(folder)), *filter(None, [os.environ.get("PYTHONPATH")])]
        env["PYTHONPATH"] = os.pathsep.join(path)
    figures = Figures(label, [], [], [])
    for index in range(runs + 1):
        note = folder / "first-request-cpu"
        command = [sys.executable, "-c", WRAPPER, str(note), "-p", "hi"]
        command += ["--model", f"scripted:{script}", "--cwd", str(folder)]
        cpu, wall = run_child(command, env, folder)
        if index:
            figures.to_first_request_ms.append(float(note.read_text()) * 1000)
            figures.run_cpu_ms.append(cpu)
            figures.wall_ms.append(wall)
    return figures


def _package_copy(folder: Path) -> Path:
    """A copy of the ``subagents`` package this bench would import, without bytecode: the
    folder to put first on ``PYTHONPATH``."""
    spec = importlib.util.find_spec("subagents")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the subagents package is not importable")
    into = folder / "source"
    shutil.rmtree(into, ignore_errors=True)
    source = Path(next(iter(spec.submodule_search_locations)))
    shutil.copytree(source, into / "subagents", ignore=shutil.ignore_patterns("__pycache__"))
    return into


def measure_floor(label: str, code: str, runs: int, folder: Path) -> Figures:
    figures = Figures(label, [], [], [])
    for index in range(runs + 1):
        cpu, wall = run_child([sys.executable, "-c", code], child_env(), folder)
        if index:
            figures.run_cpu_ms.append(cpu)
            figures.wall_ms.append(wall)
    return figures


def _entry() -> str:
    """The installed ``subagents`` console script beside this interpreter."""
    return str(Path(sys.executable).with_name("subagents"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    server = ServerThread()
    with tempfile.TemporaryDirectory(prefix="startup-") as tmp:
        folder = Path(tmp)
        os.environ["SUBAGENTS_HOME"] = str(folder / "home")
        rows = [
            measure_scripted(args.runs, folder),
            measure_scripted(args.runs, folder, bytecode=False),
            measure_anthropic(server, args.runs, folder),
            measure_floor("floor: python -c pass", "pass", args.runs, folder),
            measure_floor(
                "floor: + asyncio, ssl, json", "import asyncio, ssl, json", args.runs, folder
            ),
        ]
    for row in rows:
        print(json.dumps(asdict(row)) if args.json else row.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
