"""Does a real model pick the right agent type from the catalog? (embedded model by default)

Each task gives the coordinator a goal and a few custom agent types on the command line
(``--agents``) and never names the type to use: the model has to read the catalog it is shown
(name, when to use it, tools) and choose. A run counts as *picked* when the main agent spawned
the expected type (the ``agents`` list of the ``json`` result), and as *answered* when the final
answer also contains the expected fact.

It drives the real command (``subagents -p … --output-format json``) on this repository, the
way a user would, one run after the other (the 1.5B model takes one to two minutes a run on 2
cores). Usage::

    python bench/real_model.py                  # every task, 5 runs each, --model local
    python bench/real_model.py --runs 3 --task locate --model openai:qwen2.5-coder

Prints one JSON object (per task: runs, picked, answered, seconds per run, what each run
spawned) plus a readable line per run on stderr.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

AGENTS = {
    "locator": {
        "description": "Finds the file that defines a given class or function: one Grep for "
        "the definition, then the path.",
        "prompt": "Your task names a symbol such as class Foo or def bar. Call Grep with "
        'exactly that definition as the pattern, for example {"pattern": "class Foo", '
        '"path": "src", "output_mode": "files_with_matches"}. Then reply with the file path '
        "it found and nothing else.",
        "tools": ["Grep"],
        "maxTurns": 4,
    },
    "file-counter": {
        "description": "Counts the files that match a glob pattern: one Glob, then the number.",
        "prompt": "Your task names a set of files. Call Glob once with a pattern for them, "
        'for example {"pattern": "tests/test_*.py"}, count the paths it returns, and reply '
        "with the number and the pattern you used.",
        "tools": ["Glob"],
        "maxTurns": 4,
    },
}


@dataclass(frozen=True)
class Task:
    name: str
    prompt: str
    expected_type: str
    expected_answer: str


TASKS = (
    Task(
        name="locate",
        prompt="Which file defines class AgentTool? Delegate the search to the sub-agent "
        "type best suited for finding where a symbol is defined, then answer with the path.",
        expected_type="locator",
        expected_answer="agent_tool.py",
    ),
    Task(
        name="count",
        prompt="How many test modules (tests/test_*.py) does this repository have? Delegate "
        "the counting to the most suitable sub-agent type, then answer with the number.",
        expected_type="file-counter",
        expected_answer=str(len(list((REPO / "tests").glob("test_*.py")))),
    ),
)


def run_once(task: Task, model: str, max_turns: int) -> dict[str, Any]:
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "subagents",
            "-p",
            task.prompt,
            "--model",
            model,
            "--agents",
            json.dumps(AGENTS),
            "--cwd",
            str(REPO),
            "--max-turns",
            str(max_turns),
            "--output-format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    seconds = round(time.monotonic() - started, 1)
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        return {"seconds": seconds, "error": (proc.stderr or proc.stdout)[-400:], "spawned": []}
    spawned = [a["agentType"] for a in result.get("agents", [])[1:]]
    text = str(result.get("result", ""))
    return {
        "seconds": seconds,
        "spawned": spawned,
        "picked": task.expected_type in spawned,
        "answered": task.expected_type in spawned and task.expected_answer in text,
        "result": text[:300],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="local")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--task", choices=[t.name for t in TASKS], action="append")
    parser.add_argument("--max-turns", type=int, default=6)
    args = parser.parse_args()
    report: dict[str, Any] = {"model": args.model, "tasks": {}}
    for task in TASKS:
        if args.task and task.name not in args.task:
            continue
        runs = []
        for index in range(args.runs):
            outcome = run_once(task, args.model, args.max_turns)
            runs.append(outcome)
            print(f"{task.name} run {index + 1}: {json.dumps(outcome)}", file=sys.stderr)
        report["tasks"][task.name] = {
            "runs": len(runs),
            "picked": sum(1 for r in runs if r.get("picked")),
            "answered": sum(1 for r in runs if r.get("answered")),
            "seconds": [r["seconds"] for r in runs],
            "spawned": [r["spawned"] for r in runs],
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
