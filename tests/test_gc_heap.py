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

from subagents.config import RuntimeConfig
from subagents.gc_heap import PYTHON_THRESHOLDS, RUNTIME_THRESHOLDS

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
if sys.argv[3] != "-":
    gc.set_threshold(*map(int, sys.argv[3].split(",")))  # the program's own choice
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
    "thresholds": list(gc.get_threshold()),
}))
"""


def run_program(
    tmp_path: Path,
    *,
    env: dict[str, str] | None = None,
    gc_on: bool = True,
    thresholds: str = "-",
) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(tmp_path), "on" if gc_on else "off", thresholds],
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
    # The program left Python's thresholds: the runtime's are set (``gc_heap.tune_collector``).
    assert out["thresholds"] == list(RUNTIME_THRESHOLDS) == [10_000, 10, 100]


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
    if how == "collector off":  # the program manages collection: its thresholds stay too
        assert out["thresholds"] == list(PYTHON_THRESHOLDS)


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("program", [500, 5, 5]),  # the program chose its own: kept
        ("env off", list(PYTHON_THRESHOLDS)),
        ("env values", [1000, 20, 50]),
    ],
)
def test_thresholds_are_left_to_a_program_that_chose_or_opted_out(
    tmp_path: Path, how: str, expected: list[int]
) -> None:
    if how == "program":
        out = run_program(tmp_path, thresholds="500,5,5")
    elif how == "env off":
        out = run_program(tmp_path, env={"SUBAGENTS_GC_THRESHOLDS": "off"})
    else:
        out = run_program(tmp_path, env={"SUBAGENTS_GC_THRESHOLDS": "1000,20,50"})
    assert out["results"] == ["ok", "ok"]
    assert out["thresholds"] == expected


@pytest.mark.parametrize("raw", ["700,10", "a,b,c", "700,0,10", "700,10,10,10"])
def test_a_bad_threshold_variable_is_refused_by_name(raw: str) -> None:
    with pytest.raises(ValueError, match="SUBAGENTS_GC_THRESHOLDS"):
        RuntimeConfig.from_env({"SUBAGENTS_GC_THRESHOLDS": raw})


DROPPED = r"""
import asyncio, gc, json, sys, weakref
from pathlib import Path
from subagents import ScriptedModel, Session, SessionOptions

root = Path(sys.argv[1])
script = {"agents": [{"agent_type": "main", "turns": [{"text": "ok"}]}]}

async def first(how):
    options = SessionOptions(model=ScriptedModel.from_dict(script), cwd=root, home=root / "home")
    session = Session(options)
    if how != "run":
        session.hold()
    await session.run("go")
    if how == "held, closed":
        await session.close()
    return weakref.ref(session), weakref.ref(options.model)

session, model = asyncio.run(first(sys.argv[2]))
gc.collect()
print(json.dumps({"session": session() is None, "model": model() is None,
                  "frozen": gc.get_freeze_count() > 1000}))
"""


@pytest.mark.parametrize("how", ["run", "held, closed", "held, dropped"])
def test_the_first_session_of_a_process_is_collected_once_dropped(tmp_path: Path, how: str) -> None:
    """The heap is frozen at the process's first session, but not with that session in it: a
    frozen object is never collected, and a session is a cycle of objects (its runtime, its
    agents' contexts, bound methods). Dropped — closed or not, after its loop ended — it is
    collected, and the model it was given with it."""
    done = subprocess.run(
        [sys.executable, "-c", DROPPED, str(tmp_path), how],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out == {"session": True, "model": True, "frozen": True}


LOCKS = r"""
import asyncio, gc, json, os, sys
from pathlib import Path
from subagents import ScriptedModel, Session, SessionOptions
from subagents.store import session_lock

root = Path(sys.argv[1])
script = {"agents": [{"agent_type": "main", "turns": [{"text": "ok"}]}]}

async def held():
    options = SessionOptions(model=ScriptedModel.from_dict(script), cwd=root, home=root / "home")
    session = Session(options).hold()
    await session.run("go")
    return session.state.session_lock(session.session_id)

paths = [asyncio.run(held()) for _ in range(3)]
gc.collect()
def target(name):
    try:
        return os.readlink(f"/proc/self/fd/{name}")
    except OSError:  # the listing's own descriptor, closed by now
        return ""

open_locks = [name for name in os.listdir("/proc/self/fd") if target(name).endswith(".lock")]
free = []
for path in paths:
    try:
        session_lock.release(session_lock.take_exclusive(path))
        free.append(True)
    except session_lock.SessionBusy:
        free.append(False)
print(json.dumps({"open_locks": len(open_locks), "free": free}))
"""


def test_a_dropped_held_session_lets_go_of_its_session_lock(tmp_path: Path) -> None:
    """A held session dropped without ``close`` is collected; its session lock (a descriptor
    held shared, which ``subagents compact`` waits on) goes with it instead of staying held
    until the process exits."""
    done = subprocess.run(
        [sys.executable, "-c", LOCKS, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"open_locks": 0, "free": [True] * 3}
