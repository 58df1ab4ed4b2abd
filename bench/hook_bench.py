"""What a command hook costs this process: a PreToolUse hook run on every tool call.

Claude Code users commonly configure a ``PreToolUse`` command hook that runs before every tool
call (a logger, a policy check). Its own process's CPU is its own; what this bench measures is
the CPU *this* process spends starting it, feeding it its JSON, reading its output, waiting
for it and ending its process tree — per hook run, three ways:

* ``session`` — through the library as a user runs it (``Session``, settings read from the
  project's ``.claude/settings.json``, transcripts on): a main agent making N tool calls, one
  per model call, with one ``PreToolUse`` command hook on that tool, against the same session
  with no hook; the difference over N is the hook's cost per tool call.
* ``runner`` — ``subagents.hooks.run_hooks`` called N times in a row with one hook and the
  payload of a tool call: the runner alone.
* ``floor`` — the same command started N times with no runtime: ``posix_spawn`` of
  ``/bin/sh -c COMMAND`` with the payload written to its stdin, stdout and stderr on pipes
  read by the loop, waited for through a pidfd. What a hook run cannot cost less than in this
  process (the kill of its group and the search for its tagged processes come on top).

CPU is ``time.process_time()`` (this process, every thread: a child watcher's, a worker
thread's); the hook's own processes are not in it. The command is ``--command`` (default
``cat > /dev/null``: a hook that reads its input, as every real hook does).

Run: ``python bench/hook_bench.py`` (all three, 5 interleaved rounds of N = 200), or
``--only session --n 500 --rounds 3``. Compare trees with ``PYTHONPATH=/other/tree/src``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bare_spawn
from bench import NoteTool  # the fan-out's trivial tool: the figure is the hook's
from subagents import ScriptedModel, Session, SessionOptions
from subagents.hooks import HookCommand, clean_environment, run_hooks


def script(n: int) -> dict[str, Any]:
    """A main agent making ``n`` Note calls, one per model call, then answering."""
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "Note", "input": {"text": f"step {i}"}}]} for i in range(n)
    ]
    turns.append({"text": "done"})
    return {"agents": [{"agent_type": "main", "turns": turns}]}


def project(base: Path, command: str | None) -> Path:
    """A project folder whose settings hold one PreToolUse hook on Note (or none)."""
    folder = Path(tempfile.mkdtemp(prefix="hooks-", dir=base))
    (folder / "home").mkdir()
    hooks: dict[str, Any] = {}
    if command is not None:
        hooks = {
            "PreToolUse": [{"matcher": "Note", "hooks": [{"type": "command", "command": command}]}]
        }
    (folder / ".claude").mkdir()
    (folder / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    return folder


async def session_cpu(folder: Path, n: int) -> float:
    """CPU seconds of one session of ``n`` tool calls in ``folder``."""
    session = Session(
        SessionOptions(
            model=ScriptedModel.from_dict(script(n), keep_requests=False),
            cwd=folder,
            home=folder / "home",
            tools=[],
            extra_tools=[NoteTool()],
        )
    )
    cpu0 = time.process_time()
    result = await session.run("bench")
    cpu = time.process_time() - cpu0
    if result.is_error or result.result != "done":
        raise RuntimeError(f"bench run failed: {result.result}")
    return cpu


PAYLOAD = {
    "session_id": "0" * 36,
    "transcript_path": "/tmp/transcript.jsonl",
    "cwd": "/tmp",
    "hook_event_name": "PreToolUse",
    "tool_name": "Note",
    "tool_input": {"text": "step 1"},
    "tool_use_id": "toolu_" + "0" * 24,
}


async def runner_cpu(folder: Path, command: str, n: int) -> float:
    hook = HookCommand(command=command)
    env = clean_environment(folder, os.environ)
    cpu0 = time.process_time()
    for _ in range(n):
        [run] = await run_hooks([hook], PAYLOAD, cwd=folder, env=env)
        if run.exit_code != 0:
            raise RuntimeError(f"the hook failed: {run}")
    return time.process_time() - cpu0


async def floor_cpu(folder: Path, command: str, n: int) -> float:
    env = clean_environment(folder, os.environ)
    data = json.dumps(PAYLOAD).encode()
    cpu0 = time.process_time()
    for _ in range(n):
        code = await bare_run(command, data, folder, env)
        if code != 0:
            raise RuntimeError(f"the command failed: {code}")
    return time.process_time() - cpu0


async def bare_run(command: str, data: bytes, cwd: Path, env: dict[str, str]) -> int:
    """``/bin/sh -c command`` with ``data`` on stdin, stdout and stderr read, through a pidfd."""
    code, _ = await bare_spawn.bare_run("/bin/sh", command, cwd, env, data=data)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="hook runs (tool calls) per measure")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--command", default="cat > /dev/null")
    parser.add_argument("--only", choices=("session", "runner", "floor"), action="append")
    parser.add_argument("--dir", default="/dev/shm", help="where the projects go")
    args = parser.parse_args(argv)
    kinds = args.only or ["session", "runner", "floor"]
    base = Path(tempfile.mkdtemp(prefix="hook-bench-", dir=args.dir))
    hooked, bare = project(base, args.command), project(base, None)
    n = args.n
    measures: dict[str, bare_spawn.Measure] = {
        "session, no hook": lambda: session_cpu(bare, n),
        "session, hook": lambda: session_cpu(hooked, n),
        "runner": lambda: runner_cpu(hooked, args.command, n),
        "floor": lambda: floor_cpu(hooked, args.command, n),
    }
    wanted = {name: measure for name, measure in measures.items() if name.split(",")[0] in kinds}
    try:
        figures = asyncio.run(bare_spawn.interleaved(wanted, args.rounds))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(
        f"# {args.command!r}, N = {n}, {args.rounds} rounds, load {os.getloadavg()[0]:.2f}, "
        f"python {sys.version.split()[0]}"
    )
    per = {name: [cpu / n * 1e3 for cpu in cpus] for name, cpus in figures.items()}
    if "session, hook" in per:
        pairs = zip(per["session, hook"], per["session, no hook"], strict=True)
        per["session: hook's share"] = [hook - plain for hook, plain in pairs]
    bare_spawn.print_medians(per, "ms per tool call / hook run", 24)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
