"""The runtime freezes the import heap itself, once, at a library program's first Session
(``subagents.gc_heap``; issue 20 target 5: no ``gc.freeze()`` by the caller).

Each case runs in a fresh interpreter: freezing is process-wide, and the test process's own heap
must stay as the other tests expect it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = r"""
import asyncio, gc, json, sys, weakref
from pathlib import Path

calls = []
real_freeze = gc.freeze
gc.freeze = lambda: (calls.append(1), real_freeze())[1]

from subagents import ScriptedModel, Session, SessionOptions

class Node:
    pass

def garbage_cycle():
    node = Node()
    node.self = node
    return weakref.ref(node)

if sys.argv[2] == "off":
    gc.disable()
before = garbage_cycle()  # cyclic garbage made before the first session
root = Path(sys.argv[1])
script = {"agents": [{"agent_type": "main", "turns": [{"text": "ok"}]}]}

async def session(n):
    options = SessionOptions(
        model=ScriptedModel.from_dict(script), cwd=root, home=root / "home", load_settings=False
    )
    return (await Session(options).run("go")).result

results = [asyncio.run(session(n)) for n in range(2)]
after = garbage_cycle()  # made after the freeze: the collector still frees it
gc.collect()
print(json.dumps({
    "results": results,
    "freezes": len(calls),
    "frozen": gc.get_freeze_count(),
    "before_freed": before() is None,
    "after_freed": after() is None,
}))
"""


def run_program(tmp_path: Path, *, env: dict[str, str] | None = None, gc_on: bool = True) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(tmp_path), "on" if gc_on else "off"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.splitlines()[-1]))


def test_the_first_session_freezes_the_heap_once_after_collecting_its_garbage(
    tmp_path: Path,
) -> None:
    out = run_program(tmp_path)
    assert out["results"] == ["ok", "ok"]
    assert out["freezes"] == 1, "once per process, not per session"
    assert out["frozen"] > 1000, "the import heap is in the permanent generation"
    assert out["before_freed"], "cyclic garbage from before the first session was collected"
    assert out["after_freed"], "what is made after the freeze is collected as usual"


@pytest.mark.parametrize("how", ["env", "collector off"])
def test_no_freeze_when_opted_out_or_when_the_program_manages_collection(
    tmp_path: Path, how: str
) -> None:
    if how == "env":
        out = run_program(tmp_path, env={"SUBAGENTS_GC_FREEZE": "0"})
    else:
        out = run_program(tmp_path, gc_on=False)
    assert out["results"] == ["ok", "ok"]
    assert out["freezes"] == 0
    assert out["frozen"] == 0
