"""A finished session is freed by reference counting: no reference cycles are left behind.

Cycles among a session's objects (the runtime and its managers, a child's loop and its model
caller, turn callbacks closing over their job) are freed only by Python's full garbage
collection, which then scans the whole heap — tens of milliseconds per collection once a few
finished sessions pile up in a long-lived process. These tests run real sessions with children
(foreground and background, durable sidecars and transcripts on) and look for garbage that only
the cycle collector could reclaim.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from subagents.session import Session, SessionOptions
from subagents.testing import ScriptedModel


@pytest.fixture
def no_collection() -> Iterator[None]:
    """Nothing collected behind the test's back; what a collection finds is kept to inspect."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def _cyclic_garbage() -> list[Any]:
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    found = [o for o in gc.garbage if type(o).__module__.startswith("subagents")]
    gc.set_debug(0)
    gc.garbage.clear()
    return found


def _fan_out(children: int, *, background: bool) -> dict[str, Any]:
    calls = [
        {
            "name": "Agent",
            "input": {
                "description": f"job {i}",
                "prompt": f"job {i}",
                "subagent_type": "general-purpose",
                "run_in_background": background,
            },
        }
        for i in range(children)
    ]
    return {
        "agents": [
            {
                "agent_type": "main",
                # background: each notification may wake the coordinator for one more answer
                "turns": [{"tool_calls": calls}] + [{"text": "all done"}] * (children + 1),
            },
            {
                "agent_type": "general-purpose",
                "turns": [
                    {"tool_calls": [{"name": "Glob", "input": {"pattern": "*.txt"}}]},
                    {"text": "found it"},
                ],
            },
        ]
    }


@pytest.mark.parametrize("background", [False, True])
async def test_a_finished_session_leaves_no_reference_cycles(
    tmp_path: Path, no_collection: None, background: bool
) -> None:
    (tmp_path / "a.txt").write_text("x")
    session = Session(
        SessionOptions(
            model=ScriptedModel.from_dict(_fan_out(4, background=background)),
            cwd=tmp_path,
            home=tmp_path / "home",
            background_wait_ms=2000,
        )
    )
    result = await session.run("go")
    assert result.subtype == "success"
    assert len(result.agents) == 5 and all(r.status == "completed" for r in result.agents)
    assert list((tmp_path / "home").rglob("*.jsonl")), "transcripts were written"
    del session
    leftovers = _cyclic_garbage()
    kinds = sorted({type(o).__qualname__ for o in leftovers})
    assert leftovers == [], f"objects only the cycle collector can free: {kinds}"


async def test_a_session_runs_once_and_says_so(tmp_path: Path) -> None:
    script = {"agents": [{"agent_type": "main", "turns": [{"text": "one"}, {"text": "two"}]}]}
    session = Session(SessionOptions(model=ScriptedModel.from_dict(script), cwd=tmp_path))
    assert (await session.run("first")).result == "one"
    with pytest.raises(RuntimeError, match="runs once"):
        await session.run("second")
