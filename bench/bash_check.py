"""Bash permission check: time to check 1 KB .. 3 MB commands, and the event loop meanwhile.

For each size and shape the command is checked the way the loop checks a Bash call: through
``PermissionChecker`` (the ``can_use_tool`` callable), in ``default`` mode with one deny rule
(``Bash(rm:*)``), so the full analysis runs. Reported per case:

* ``check_s`` — wall time of one ``await checker(...)`` (a fresh command each time, no cache);
* ``cpu_s`` — CPU time of the process meanwhile (the worker thread included): the figure to
  compare on a busy machine;
* ``stall_ms`` — the longest gap seen by a ticker coroutine that sleeps 1 ms in a loop while the
  check runs: how long the event loop was frozen (the floor is the timer resolution, ~1-2 ms);
* ``ticks`` — how many times the ticker ran during the check (0 = the loop never got control);
* ``verdict`` — allow / deny (an ask is a deny here: no one to ask), or ``crash: <error>``.

Shapes: ``chain`` (``echo a && echo a && ...``: many small commands), ``words`` (one command
with many arguments), ``quoted`` (quotes and substitutions: ``echo 'a' "$(date)" ...``),
``heredoc`` (one big here-document body), ``continued`` (one command continued over many
lines with backslash-newline), ``keywords`` (``if if if ... true``: unbalanced, so unparsable),
``nested`` (``$(`` nested as deep as the size allows,
capped at 20,000 levels).

Commands over ``bash_parse.MAX_SCRIPT_CHARS`` (256 KiB) are not analysed (bash cannot run them);
``--uncapped`` lifts the cap to measure the analyser itself on 1 MB and 3 MB.

Run: ``python bench/bash_check.py [--sizes 1000,100000,1000000,3000000] [--shapes chain,words]
[--uncapped]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.permissions import DenialLimits, PermissionChecker, PermissionContext, parse_rule
from subagents.tools.base import ToolContext
from subagents.tools.bash import BashTool
from subagents.tools.inputs.bash import BashInput

SHAPES = ("chain", "words", "quoted", "heredoc", "continued", "keywords", "nested")
SIZES = (1_000, 100_000, 1_000_000, 3_000_000)


def make_command(shape: str, size: int, salt: int) -> str:
    """A command of about ``size`` characters; ``salt`` makes each one distinct (no cache)."""
    head = f"true {salt}; "
    if shape == "chain":
        unit = "echo a && "
        return head + unit * (size // len(unit)) + "true"
    if shape == "words":
        return head + "echo" + " x" * (size // 2)
    if shape == "quoted":
        unit = "echo 'a b' \"c $(date) d\" e\\ f; "
        return head + unit * (size // len(unit)) + "true"
    if shape == "continued":
        return head + "echo" + " a\\\n" * (size // 4) + " end"
    if shape == "keywords":
        return head + "if " * (size // 3) + "true"
    if shape == "heredoc":
        line = "a line of text\n"
        return head + "cat <<'EOF'\n" + line * (size // len(line)) + "EOF\n"
    depth = min(size // 4, 20_000)
    return head + "echo " + "$(" * depth + "x" + ")" * depth


async def check_once(command: str, repo: Path) -> tuple[float, float, float, int, str]:
    context = PermissionContext(
        mode="default", project_root=repo, deny=(parse_rule("Bash(rm:*)", "bench"),)
    )
    checker = PermissionChecker(context=context, denial_limits=DenialLimits())
    ctx = ToolContext(
        cwd=repo,
        roots=(repo,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="bench", agent_type="main"),
    )
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker(), name="bench-ticker")
    await asyncio.sleep(0.005)
    gaps.clear()
    start, cpu = time.perf_counter(), time.process_time()
    try:
        verdict = (await checker(BashTool(), BashInput(command=command), ctx)).behavior
    except Exception as exc:  # the check itself failed: report it rather than stop the bench
        verdict = f"crash: {type(exc).__name__}"
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    done.set()
    await task
    return elapsed, cpu, max(gaps, default=elapsed) * 1000, len(gaps), verdict


async def run(sizes: list[int], shapes: list[str], repo: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for shape in shapes:
        for size in sizes:
            command = make_command(shape, size, salt=len(rows))
            elapsed, cpu, stall, ticks, verdict = await check_once(command, repo)
            row = {
                "shape": shape,
                "chars": len(command),
                "check_s": round(elapsed, 4),
                "cpu_s": round(cpu, 4),
                "stall_ms": round(stall, 1),
                "ticks": ticks,
                "verdict": verdict,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--uncapped", action="store_true", help="analyse past the 256 KiB cap")
    args = parser.parse_args()
    if args.uncapped:
        from subagents.tools import bash_parse

        bash_parse.MAX_SCRIPT_CHARS = 1 << 30
    sizes = [int(s) for s in args.sizes.split(",")]
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = set(shapes) - set(SHAPES)
    if unknown:
        parser.error(f"unknown shape(s) {sorted(unknown)}; choose from {', '.join(SHAPES)}")
    asyncio.run(run(sizes, shapes, Path.cwd().resolve()))


if __name__ == "__main__":
    main()
