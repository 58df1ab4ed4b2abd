"""A child's turn callback (``child_run.TurnWatch``): its activity note and its denial breaker in
one call after each model call. Compared with the plain form it replaced — two chained callbacks,
the breaker's calling the activity watch's first (kept here as the reference) — over random runs
of turns: the same activity writes at the same turns, the same aborts, the same previous calls."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cli_helpers import agent_call
from subagents.agents import child_run, children
from subagents.agents.child_run import TurnWatch
from subagents.messages import tool_uses
from subagents.session import Session, SessionOptions
from subagents.store import FileStore, durable
from subagents.testing import ScriptedModel


def bg_call(prompt: str, subagent_type: str) -> dict[str, Any]:
    return agent_call(prompt, subagent_type, description="bg job", run_in_background=True)


class _PlainActivity:
    def __init__(self, records: Any, agent_id: str, previous: Callable[[Any], None] | None):
        self.records, self.agent_id, self.previous = records, agent_id, previous
        self.due = time.monotonic() + durable.ACTIVITY_INTERVAL_S

    def __call__(self, stats: Any) -> None:
        if self.previous is not None:
            self.previous(stats)
        now = time.monotonic()
        if now >= self.due:
            self.due = now + durable.ACTIVITY_INTERVAL_S
            self.records.activity(self.agent_id)


class _PlainBreaker:
    def __init__(self, job: Any, checker: Any, previous: Callable[[Any], None] | None):
        self.job, self.checker, self.previous = job, checker, previous
        self.agent_id = job.run.agent_id

    def __call__(self, stats: Any) -> None:
        if self.previous is not None:
            self.previous(stats)
        if self.checker.breaker_tripped(self.agent_id) and tool_uses(self.job.messages[-1]):
            self.job.ctx.abort.abort(
                "stopped: it kept retrying calls that were denied (denial breaker)"
            )


class _World:
    """One child's view: a clock, a record's activity calls, a breaker, its last message."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log
        self.tripped = False
        self.job = SimpleNamespace(
            run=SimpleNamespace(agent_id="a1"),
            messages=[{"role": "assistant", "content": []}],
            ctx=SimpleNamespace(
                abort=SimpleNamespace(abort=lambda why: log.append(("abort", why)))
            ),
            frame=SimpleNamespace(permissions=self),
            on_turn=None,
        )
        self.records = SimpleNamespace(activity=lambda agent_id: log.append(("activity", agent_id)))

    def breaker_tripped(self, agent_id: str) -> bool:
        self.log.append(("asked", agent_id))
        return self.tripped

    def step(self, rng: random.Random, watch: Callable[[Any], None]) -> None:
        self.tripped = rng.random() < 0.3
        tool_use = {"type": "tool_use", "id": "t", "name": "Read", "input": {}}
        self.job.messages[-1] = {
            "role": "assistant",
            "content": [tool_use] if rng.random() < 0.5 else [],
        }
        watch("stats")


def _previous(log: list[Any]) -> Callable[[Any], None]:
    return lambda stats: log.append(("previous", stats))


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("shape", ["both", "activity", "breaker", "previous"])
def test_the_turn_watch_does_what_the_two_chained_callbacks_did(
    seed: int, shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(durable, "ACTIVITY_INTERVAL_S", 10.0)
    logs: list[list[Any]] = []
    for merged in (True, False):
        rng = random.Random(seed)
        clock[0] = 1000.0
        log: list[Any] = []
        world = _World(log)
        previous = _previous(log) if shape == "previous" else None
        job: Any = world.job
        job.on_turn = previous
        if merged:
            if shape != "breaker":
                children._track_activity(job, world.records)  # type: ignore[arg-type]
            if shape != "activity":
                child_run._watch_breaker(job)
            watch = job.on_turn
            assert isinstance(watch, TurnWatch)
            if shape == "both":
                assert watch.previous is None  # one callback does both
        else:
            watch = previous
            if shape != "breaker":
                watch = _PlainActivity(world.records, "a1", watch)
            if shape != "activity":
                watch = _PlainBreaker(job, world, watch)
        for _ in range(30):
            clock[0] += rng.choice((0.05, 1.0, 4.0, 9.9, 10.0, 25.0))
            world.step(rng, watch)
        logs.append(log)
    assert logs[0] == logs[1]
    assert any(entry[0] == "activity" for entry in logs[0]) or shape == "breaker"


async def test_a_background_child_that_keeps_calling_denied_tools_is_stopped(
    tmp_path: Path,
) -> None:
    """Through a session: a background child (its activity watch and its breaker in one
    callback) whose Bash calls are all denied is aborted at the turn after the breaker trips
    (three consecutive denials), and its terminal record says so."""
    bash = {"tool_calls": [{"name": "Bash", "input": {"command": "rm -rf x"}}]}
    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [bg_call("go", "general-purpose")]},
                    *({"text": "ok"},) * 3,
                ],
            },
            {"agent_type": "general-purpose", "turns": [bash] * 8 + [{"text": "never"}]},
        ]
    }
    options = SessionOptions(
        model=ScriptedModel.from_dict(script),
        cwd=tmp_path,
        home=tmp_path / "home",
        disallowed_tools=["Bash(rm:*)"],
    )
    session = Session(options)
    result = await session.run("go")
    child = result.agents[1]
    assert child.status == "killed" and "denial breaker" in (child.error or "")
    assert child.stats.num_turns == 4  # three denied calls trip it; the fourth turn is stopped
    records = session.background.records
    assert records is not None and isinstance(records.store, FileStore)
    record = FileStore(records.store.state).get(child.agent_id)
    assert record is not None and record.status == "killed" and record.stats.num_turns == 4
