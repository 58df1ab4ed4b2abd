"""Per-call cost of Read, Write and Edit, the way the loop calls them (``tool.call``).

Measures wall and CPU time per call on a small file three folders deep in a temporary project
(``SUBAGENTS_BENCH_DIR`` chooses where; a RAM file system keeps the disk out of the figure).
The floor beside each figure is the bare system-call work of the same operation (``open`` +
``read``/``write`` + ``close`` by path, in the same thread hop), so the number says what the
tool adds: confinement, the no-symlink walk (``tools.confined``), checks and formatting.

    SUBAGENTS_BENCH_DIR=/dev/shm/sb python bench/file_tools.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.tools.base import CallInfo, Tool, ToolContext
from subagents.tools.edit import EditTool
from subagents.tools.read import ReadTool
from subagents.tools.write import WriteTool

CALLS = 500
ROUNDS = 20
TEXT = "line of text\n" * 40


def measure(run: Callable[[int], Awaitable[Any]]) -> tuple[float, float]:
    """Best of ``ROUNDS`` (wall µs, CPU µs) per call."""

    async def rounds() -> tuple[float, float]:
        best_wall = best_cpu = float("inf")
        for _ in range(ROUNDS):
            wall, cpu = time.perf_counter(), time.process_time()
            for i in range(CALLS):
                await run(i)
            best_wall = min(best_wall, (time.perf_counter() - wall) / CALLS * 1e6)
            best_cpu = min(best_cpu, (time.process_time() - cpu) / CALLS * 1e6)
        return best_wall, best_cpu

    return asyncio.run(rounds())


def main() -> None:
    base = os.environ.get("SUBAGENTS_BENCH_DIR") or tempfile.gettempdir()
    Path(base).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base) as folder:
        project = Path(folder)
        target = project / "src" / "pkg" / "mod" / "file.txt"
        target.parent.mkdir(parents=True)
        target.write_text(TEXT)
        ctx = ToolContext(
            cwd=project,
            roots=(project,),
            abort=AbortSignal(),
            agent=AgentRef(agent_id="bench", agent_type="main"),
        )
        info = CallInfo(tool_use_id="t", progress=lambda data: None)
        rel = "src/pkg/mod/file.txt"

        def tool_run(tool: Tool[Any], **raw: Any) -> Callable[[int], Awaitable[Any]]:
            args = tool.input_model.model_validate(raw)
            return lambda i: tool.call(args, ctx, info)

        def edit_run(i: int) -> Awaitable[Any]:
            old, new = (
                ("line of text", "LINE OF TEXT") if i % 2 == 0 else ("LINE OF TEXT", "line of text")
            )
            args = EditTool.input_model.model_validate(
                {"file_path": rel, "old_string": old, "new_string": new, "replace_all": True}
            )
            return EditTool().call(args, ctx, info)

        def floor_read(i: int) -> Awaitable[Any]:
            return asyncio.to_thread(target.read_bytes)

        def floor_write(i: int) -> Awaitable[Any]:
            return asyncio.to_thread(target.write_text, TEXT)

        rows = [
            ("Read", tool_run(ReadTool(), file_path=rel), floor_read),
            ("Write", tool_run(WriteTool(), file_path=rel, content=TEXT), floor_write),
            ("Edit", edit_run, floor_read),
        ]
        print(f"# {CALLS} calls x best of {ROUNDS}, file 3 folders deep, state under {base}")
        for name, run, floor in rows:
            wall, cpu = measure(run)
            floor_wall, floor_cpu = measure(floor)
            print(
                f"{name:6} wall/call={wall:7.1f} µs  cpu/call={cpu:7.1f} µs   "
                f"(floor: open+io+close by path in to_thread: wall {floor_wall:6.1f}, "
                f"cpu {floor_cpu:6.1f})"
            )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
