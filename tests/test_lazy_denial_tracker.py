"""An agent whose calls are all allowed at once gets no denial tracker
(``PermissionChecker.allowed_at_once``); the first awaited call makes a fresh one. Against a
checker whose trackers exist from the start (what the at-once path made at an agent's first
call before), random runs of at-once and awaited calls of two agents give the same answers,
the same verdicts and the same counts after every step; and a session's children that only
read make none."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from cli_helpers import agent_call
from step_tool import StepTool
from subagents import core_tools
from subagents.abort import AbortSignal
from subagents.agents import agent_run
from subagents.agents.agent_run import AgentFrame
from subagents.agents.agent_tool import AgentTool
from subagents.events import AgentRef
from subagents.loop.query import LoopOutcome, LoopSpec
from subagents.permissions import PermissionChecker, PermissionContext
from subagents.permissions.decision import allowed_without_rules
from subagents.permissions.denials import DenialLimits, DenialTracker
from subagents.session import Session, SessionOptions
from subagents.testing import ScriptedModel
from subagents.tools.base import Tool, ToolContext
from subagents.tools.read import ReadTool
from subagents.tools.write import WriteTool

AGENTS = ("a1", "a2")


class EagerChecker(PermissionChecker):
    """The reference: ``allowed_at_once`` as it was, making an agent's tracker at its first
    call."""

    def allowed_at_once(self, tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> bool:
        agent_id = ctx.agent.agent_id
        tracker = self.trackers.get(agent_id)
        if tracker is None:
            tracker = self.tracker(agent_id)
        elif tracker.tripped:
            return False
        context = self.context
        held = context.tools
        if (held is not None and tool.name not in held) or tool.name == "Bash":
            return False
        if not allowed_without_rules(context, tool, args):
            return False
        tracker.consecutive = 0
        return True


def _checker(
    kind: type[PermissionChecker], tmp_path: Path, limits: DenialLimits | None
) -> PermissionChecker:
    # No rules: a Read is allowed at once, a Write asked for (and denied: nobody to ask).
    context = PermissionContext(project_root=tmp_path, home=tmp_path / "home")
    return kind(context=context, denial_limits=limits)


def _ctx(tmp_path: Path, agent_id: str, checker: PermissionChecker) -> ToolContext:
    return ToolContext(
        cwd=tmp_path,
        roots=(tmp_path,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id=agent_id, agent_type="worker"),
        can_use_tool=checker,
    )


def _counts(checker: PermissionChecker, agent_id: str) -> tuple[int, int, bool]:
    tracker = checker.trackers.get(agent_id) or DenialTracker(limits=checker.denial_limits)
    return tracker.consecutive, tracker.total, tracker.tripped


async def _random_run(tmp_path: Path, seed: int) -> dict[str, int]:
    """One random run of both checkers side by side; how often each path was taken and how
    many agents' breakers tripped."""
    rng = random.Random(seed)
    limits = rng.choice([None, DenialLimits(), DenialLimits(max_consecutive=2, max_total=4)])
    lazy = _checker(PermissionChecker, tmp_path, limits)
    eager = _checker(EagerChecker, tmp_path, limits)
    read, write = ReadTool(), WriteTool()
    read_args = read.parse_input({"file_path": str(tmp_path / "a.txt")})
    write_args = write.parse_input({"file_path": str(tmp_path / "a.txt"), "content": "x"})
    taken = {"at once": 0, "awaited": 0, "tripped": 0}
    for _ in range(rng.randrange(1, 30)):
        agent_id = rng.choice(AGENTS)
        tool, args = rng.choice([(read, read_args), (write, write_args)])
        at_once_first = rng.random() < 0.6  # as the loop asks: at once, else awaited
        answers = []
        for checker in (lazy, eager):
            ctx = _ctx(tmp_path, agent_id, checker)
            if at_once_first and checker.allowed_at_once(tool, args, ctx):
                answers.append(("at once", "allow", ""))
                continue
            verdict = await checker(tool, args, ctx)
            answers.append(("awaited", verdict.behavior, verdict.message))
        assert answers[0] == answers[1]
        taken[answers[0][0]] += 1
        for other in AGENTS:
            assert _counts(lazy, other) == _counts(eager, other)
            assert lazy.breaker_tripped(other) == eager.breaker_tripped(other)
    assert lazy.denied == eager.denied
    taken["tripped"] = sum(eager.breaker_tripped(agent_id) for agent_id in AGENTS)
    return taken


@pytest.mark.parametrize("seed", range(16))
async def test_a_lazy_tracker_counts_as_an_eager_one(tmp_path: Path, seed: int) -> None:
    await _random_run(tmp_path, seed)


async def test_the_random_runs_take_both_paths_and_trip_breakers(tmp_path: Path) -> None:
    runs = [await _random_run(tmp_path, seed) for seed in range(16)]
    for key in ("at once", "awaited", "tripped"):
        assert sum(run[key] for run in runs) >= 5, key


async def test_a_child_that_only_reads_makes_no_tracker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs: list[LoopSpec] = []
    real = agent_run.run_loop

    async def capture(spec: LoopSpec) -> LoopOutcome:
        specs.append(spec)
        return await real(spec)

    monkeypatch.setattr(agent_run, "run_loop", capture)
    step = {"name": "Step", "input": {"path": "p"}}
    write = {"name": "Write", "input": {"file_path": str(tmp_path / "w.txt"), "content": "x"}}
    script: dict[str, Any] = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call("reads", "general-purpose", description="r"),
                            agent_call("writes", "general-purpose", description="w"),
                        ]
                    },
                    {"text": "ok"},
                ],
            },
            {
                "agent_type": "general-purpose",
                "match": "reads",
                "turns": [{"tool_calls": [step]}, {"text": "read"}],
            },
            {
                "agent_type": "general-purpose",
                "match": "writes",
                "turns": [{"tool_calls": [write]}, {"text": "denied"}],
            },
        ]
    }
    session = Session(
        SessionOptions(
            model=ScriptedModel.from_dict(script),
            cwd=tmp_path,
            home=tmp_path / "h",
            tools=[*core_tools(), AgentTool(), StepTool()],
        )
    )
    await session.run("go")
    frames = {}
    for spec in specs:
        assert isinstance(spec.ctx.owner, AgentFrame)
        frames[spec.ctx.owner.run.description or "main"] = spec.ctx.owner
    checker = frames["main"].permissions
    assert checker is not None
    reader, writer = frames["r"].run.agent_id, frames["w"].run.agent_id
    # (the Write is asked for, and a headless run denies an ask)
    assert reader not in checker.trackers
    assert _counts(checker, writer) == (1, 1, False)
    assert [d["agent_id"] for d in checker.denied] == [writer]
