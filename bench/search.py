"""How long a search with no path takes on a real project: this repository, `.venv` included.

`Grep "class AgentTool"` and `Glob "**/*.py"` as the model calls them (``tool.call``): Grep with
each engine (``rg`` when installed; the Python engine with ``SUBAGENTS_RIPGREP=0``), Glob with
its Python walk; next to the floor, ``rg`` itself run from the shell. Wall time, best of
``ROUNDS``.

    python bench/search.py [--repo PATH]

``--repo`` searches another tree (e.g. to time an older checkout's tools on the same files:
``PYTHONPATH=old/src python bench/search.py --repo .``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.tools.base import CallInfo, Tool, ToolContext
from subagents.tools.glob import GlobTool
from subagents.tools.grep import GrepTool

ROUNDS = 5


def tool_time(tool: Tool[Any], repo: Path, raw: dict[str, Any]) -> tuple[float, str]:
    """Best wall time (ms) of one call, and the first lines of its answer."""
    ctx = ToolContext(
        cwd=repo,
        roots=(repo,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="bench", agent_type="main"),
    )
    args = tool.input_model.model_validate(raw)
    info = CallInfo(tool_use_id="t", progress=lambda data: None)
    best, content = float("inf"), ""
    for _ in range(ROUNDS):
        start = time.perf_counter()
        content = asyncio.run(tool.call(args, ctx, info)).content
        best = min(best, (time.perf_counter() - start) * 1000)
    return best, content


def floor_time(repo: Path, args: list[str]) -> float | None:
    rg = Path(sys.executable).parent / "rg"
    binary = str(rg) if rg.exists() else shutil.which("rg")
    if binary is None:
        return None
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        subprocess.run([binary, *args], cwd=repo, capture_output=True, check=False)
        best = min(best, (time.perf_counter() - start) * 1000)
    return best


def summary(content: str) -> str:
    lines = content.split("\n")
    head = lines[1] if lines[0].startswith("Found ") and len(lines) > 1 else lines[0]
    return f"{lines[0] if lines[0].startswith('Found ') else f'{len(lines)} lines'}; first: {head}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent)
    repo = parser.parse_args().repo.resolve()
    venv = repo / ".venv"
    files = sum(len(f) for _, _, f in os.walk(venv)) if venv.is_dir() else 0
    print(f"# {repo} (.venv: {files} files), best of {ROUNDS}")
    cases = [
        ("Grep 'class AgentTool'", GrepTool(), {"pattern": "class AgentTool"}),
        ("Glob '**/*.py'", GlobTool(), {"pattern": "**/*.py"}),
    ]
    for label, tool, raw in cases:
        engines = ("rg", "python") if tool.name == "Grep" else ("python",)  # Glob never runs rg
        for engine in engines:
            if engine == "python":
                os.environ["SUBAGENTS_RIPGREP"] = "0"
            else:
                os.environ.pop("SUBAGENTS_RIPGREP", None)
            ms, content = tool_time(tool, repo, raw)
            print(f"{label:24} engine={engine:6} {ms:8.1f} ms   {summary(content)}")
    for label, args in [
        ("floor: rg -l", ["-l", "class AgentTool"]),
        ("floor: rg --files", ["--files"]),
    ]:
        ms = floor_time(repo, args)
        print(f"{label:24} {'':13} {ms:8.1f} ms" if ms is not None else f"{label}: no rg")


if __name__ == "__main__":
    main()
