"""What one Bash tool call costs this process: the tool real agents call most.

Each Bash call starts ``/bin/bash -c COMMAND`` in a session of its own, reads its merged
stdout and stderr, waits for it and ends its process group. The command's own CPU is its own;
what this bench measures is the CPU *this* process spends on the call, three ways:

* ``tool`` — ``BashTool().call`` N times in a row with a real ``ToolContext`` (the process
  slot, the tracker, the output's head and tail, the result text): the tool as a session runs
  it, without the model loop around it.
* ``session`` — a main agent making N Bash calls, one per model call, through ``Session``
  (scripted model, ``bypassPermissions``, transcripts on), against the same session making N
  ``Note`` calls; the difference over N is a Bash call's cost over a trivial tool's (the
  permission layer's parse of the command is in it).
* ``background`` — N background shells (``run_in_background``'s ``BackgroundShellManager``)
  started at once and waited for until each has settled (its notification sent), per shell;
  ``--threads`` also reports the most threads this process had while they ran.
* ``floor`` — the same command started N times with no runtime: ``posix_spawn`` of
  ``/bin/bash -c COMMAND`` in a new session, stdin on ``/dev/null``, stdout and stderr on one
  pipe read by the loop to its end, waited for through a pidfd. What a call cannot cost less
  than in this process.

Commands: ``true``, ``echo hi``, and ``seq 1 20000`` (108,894 bytes of output); ``--command
sleep`` (``sleep 1``) for background shells that all run at once. CPU is
``resource.getrusage(RUSAGE_SELF)``, user + system: this process, every thread (asyncio's
child-watcher threads included), children excluded. ``--count-calls`` prints Python function
calls per tool call instead (cProfile's count, main thread): a figure load cannot move. No
callgrind count: valgrind 3.19 answers ``pidfd_open`` with ENOSYS, so under it every tree
takes asyncio's way, and a ``vfork`` child's pre-exec code is counted in this process.

Run: ``python bench/bash_bench.py`` (5 interleaved rounds of N = 200); ``--only tool``;
``--way asyncio`` runs the runtime's fallback (asyncio's subprocesses, as without pidfds);
compare trees with ``PYTHONPATH=/other/tree/src``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import bare_spawn
from bench import NoteTool  # the fan-out's trivial tool: the difference is Bash's
from subagents import ScriptedModel, Session, SessionOptions, processes
from subagents.abort import AbortSignal
from subagents.agents.shells import BackgroundShellManager
from subagents.agents.tasks import TaskRegistry
from subagents.events import AgentRef
from subagents.tools.base import CallInfo, ToolContext
from subagents.tools.bash import BashTool
from subagents.tools.inputs.bash import BashInput

COMMANDS = {"true": "true", "echo hi": "echo hi", "100 KB": "seq 1 20000", "sleep": "sleep 1"}
EXPECTED_LENGTH = {"true": 0, "echo hi": 3, "100 KB": 108_894, "sleep": 0}
DEFAULT_COMMANDS = ("true", "echo hi", "100 KB")
"""``sleep`` (``--command sleep``): background shells all running at once."""
"""Bytes each command prints: a run whose output differs is an error, not a figure."""


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def tool_cpu(folder: Path, command: str, n: int) -> float:
    ctx = ToolContext(
        cwd=folder,
        roots=(folder,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="bench", agent_type="main"),
    )
    tool, info = BashTool(), CallInfo(tool_use_id="toolu_bench", progress=lambda _event: None)
    args = BashInput(command=command)
    start = cpu()
    for _ in range(n):
        out = await tool.call(args, ctx, info)
        if out.is_error:
            raise RuntimeError(f"the command failed: {out.content[:200]}")
    return cpu() - start


PEAK_THREADS: list[int] = [0]


async def background_cpu(folder: Path, command: str, n: int) -> float:
    """N background shells of ``command`` started at once, until every one has settled."""
    import threading

    notes: list[object] = []
    shells = BackgroundShellManager(
        TaskRegistry(), folder / "tasks", lambda _owner, item: notes.append(item), poll_s=60
    )
    ctx = ToolContext(
        cwd=folder,
        roots=(folder,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="bench", agent_type="main"),
    )
    start = cpu()
    tasks = [(await shells.start(command, ctx, "bench")).metadata for _ in range(n)]
    PEAK_THREADS[0] = max(PEAK_THREADS[0], threading.active_count())
    while len(notes) < n:
        await asyncio.sleep(0.005)
    spent = cpu() - start
    await shells.shutdown()
    if len(tasks) != n:
        raise RuntimeError("a background shell did not start")
    return spent


def script(n: int, call: dict[str, Any]) -> dict[str, Any]:
    turns: list[dict[str, Any]] = [{"tool_calls": [call]} for _ in range(n)]
    turns.append({"text": "done"})
    return {"agents": [{"agent_type": "main", "turns": turns}]}


async def session_cpu(folder: Path, n: int, call: dict[str, Any]) -> float:
    session = Session(
        SessionOptions(
            model=ScriptedModel.from_dict(script(n, call), keep_requests=False),
            cwd=folder,
            home=folder / "home",
            extra_tools=[NoteTool()],
            permission_mode="bypassPermissions",
        )
    )
    start = cpu()
    result = await session.run("bench")
    spent = cpu() - start
    if result.is_error or result.result != "done":
        raise RuntimeError(f"bench run failed: {result.result}")
    return spent


async def floor_cpu(folder: Path, command: str, n: int) -> float:
    env = dict(os.environ)
    start = cpu()
    for _ in range(n):
        code, _ = await bare_run(command, folder, env)
        if code != 0:
            raise RuntimeError(f"the command failed: {code}")
    return cpu() - start


async def bare_run(command: str, cwd: Path, env: dict[str, str]) -> tuple[int, int]:
    """``/bin/bash -c command``, stdout and stderr on one pipe read to its end, through a pidfd:
    its exit status and how many bytes it printed."""
    return await bare_spawn.bare_run("/bin/bash", command, cwd, env, merge=True)


def count_calls(folder: Path, n: int) -> None:
    """Python function calls per tool call (cProfile's count over N calls after a warm-up)."""
    import cProfile

    for name, command in COMMANDS.items():
        asyncio.run(tool_cpu(folder, command, 5))
        profile = cProfile.Profile()
        profile.enable()
        asyncio.run(tool_cpu(folder, command, n))
        profile.disable()
        every = sum(entry.callcount for entry in profile.getstats())
        # asyncio.run's own set-up and teardown are in the count: a few hundred calls, once.
        print(f"{name:10} Python calls per tool call: {every / n:.1f}  (N = {n})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="Bash calls per measure")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--only", choices=("tool", "session", "background", "floor"), action="append"
    )
    parser.add_argument("--way", choices=("pidfd", "asyncio"), default="pidfd")
    parser.add_argument("--command", choices=tuple(COMMANDS), action="append")
    parser.add_argument("--dir", default="/dev/shm", help="where the project folder goes")
    parser.add_argument("--count-calls", action="store_true")
    args = parser.parse_args(argv)
    if args.way == "asyncio":
        processes._pidfds = False  # what have_pidfds() answers on a machine without them
    base = Path(tempfile.mkdtemp(prefix="bash-bench-", dir=args.dir))
    (base / "home").mkdir()
    n = args.n
    if args.count_calls:
        try:
            count_calls(base, n)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        return 0
    kinds = args.only or ["tool", "session", "background", "floor"]
    names = args.command or list(DEFAULT_COMMANDS)
    measures: dict[str, bare_spawn.Measure] = {}
    for name in names:
        command = COMMANDS[name]
        if "tool" in kinds:
            measures[f"tool: {name}"] = lambda c=command: tool_cpu(base, c, n)
        if "session" in kinds:
            call = {"name": "Bash", "input": {"command": command}}
            measures[f"session: {name}"] = lambda c=call: session_cpu(base, n, c)
        if "background" in kinds:
            measures[f"background: {name}"] = lambda c=command: background_cpu(base, c, n)
        if "floor" in kinds:
            measures[f"floor: {name}"] = lambda c=command: floor_cpu(base, c, n)
    if "session" in kinds:
        note = {"name": "Note", "input": {"text": "step"}}
        measures["session: Note"] = lambda: session_cpu(base, n, note)

    async def run() -> dict[str, list[float]]:
        for name in names:
            _, size = await bare_run(COMMANDS[name], base, dict(os.environ))
            if size != EXPECTED_LENGTH[name]:
                raise RuntimeError(f"{COMMANDS[name]!r} printed {size} bytes here")
        return await bare_spawn.interleaved(measures, args.rounds)

    try:
        figures = asyncio.run(run())
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(
        f"# N = {n}, {args.rounds} rounds, load {os.getloadavg()[0]:.2f}, "
        f"python {sys.version.split()[0]}, {args.way} way"
    )
    if "background" in kinds:
        print(f"# most threads while the background shells ran: {PEAK_THREADS[0]}")
    per = {name: [spent / n * 1e3 for spent in cpus] for name, cpus in figures.items()}
    if "session: Note" in per:
        for name in names:
            pairs = zip(per[f"session: {name}"], per["session: Note"], strict=True)
            per[f"session: {name}, over Note"] = [bash - note for bash, note in pairs]
    bare_spawn.print_medians(per, "ms of CPU per call", 28)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
