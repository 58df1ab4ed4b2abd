"""Calls answered at once (``Tool.call_at_once``, ``scheduling._answer_at_once``): the leading
calls of a concurrent group whose tool answers without awaiting run without a task each.

The reference is the old scheduling — every call of the group in a task of one ``TaskGroup``,
``_answer_at_once`` answering none — run on the same random turns: the calls start, suspend,
end and are cancelled in the same order, at most as many run at once, and the results and the
exception are the same. Then a session's background launches: the same children, records and
model inputs as with a task per call, and no task made for them."""

from __future__ import annotations

import asyncio
import random
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from cli_helpers import agent_call
from subagents.abort import AbortSignal
from subagents.agents.agent_tool import AgentTool
from subagents.events import AgentRef
from subagents.loop import scheduling
from subagents.loop.scheduling import TurnResults, run_tool_calls
from subagents.messages import ToolUseBlock
from subagents.session import Session, SessionOptions
from subagents.store import FileStore
from subagents.testing import ScriptedModel
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolError, ToolOutput


class StepInput(BaseModel):
    label: str
    at_once: str = "answer"
    """What ``call_at_once`` does: answer, decline (None), raise (ToolError), fail (ValueError),
    cancel (CancelledError)."""
    waits: int = 0
    """``call``'s suspensions (sleep(0) each) after ``call_at_once`` declined."""
    then: str = "ok"
    """How ``call`` ends after its waits: ok, raise (ToolError)."""


class Log:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.running = 0
        self.most = 0


class AtOnceTool(Tool[StepInput]):
    """Answers at once as its ``call`` would: ``call`` starts with the same answer."""

    name = "Step"
    description = "a step"
    input_model = StepInput

    def __init__(self, log: Log) -> None:
        self.log = log

    def is_read_only(self, args: StepInput) -> bool:
        return True

    def is_concurrency_safe(self, args: StepInput) -> bool:
        return True

    def call_at_once(self, args: StepInput, ctx: ToolContext, info: CallInfo) -> ToolOutput | None:
        if args.at_once == "decline":
            return None
        self.log.events.append(f"at-once:{args.label}")
        if args.at_once == "raise":
            raise ToolError(f"refused {args.label}")
        if args.at_once == "fail":
            raise ValueError(f"broken {args.label}")
        if args.at_once == "cancel":
            raise asyncio.CancelledError
        return ToolOutput(content=f"answered {args.label} ({info.tool_use_id})")

    async def call(self, args: StepInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        answer = self.call_at_once(args, ctx, info)
        if answer is not None:
            return answer
        log = self.log
        log.events.append(f"start:{args.label}")
        log.running += 1
        log.most = max(log.most, log.running)
        try:
            for step in range(args.waits):
                await asyncio.sleep(0)
                log.events.append(f"step:{args.label}:{step}")
        except asyncio.CancelledError:
            log.events.append(f"cancelled:{args.label}")
            raise
        finally:
            log.running -= 1
        log.events.append(f"end:{args.label}")
        if args.then == "raise":
            raise ToolError(f"failed {args.label}")
        return ToolOutput(content=f"done {args.label}")


class PlainTool(AtOnceTool):
    """The same tool without an answer at once (the default ``call_at_once`` is not asked)."""

    name = "Plain"

    call_at_once = Tool.call_at_once  # type: ignore[assignment]

    async def call(self, args: StepInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        args = args.model_copy(update={"at_once": "decline"})
        return await AtOnceTool.call(self, args, ctx, info)


def _turn(rng: random.Random) -> list[ToolUseBlock]:
    calls: list[ToolUseBlock] = []
    for i in range(rng.randint(2, 14)):
        kind = rng.random()
        label = f"c{i}"
        if kind < 0.08:  # invalid input: answered without running
            calls.append({"type": "tool_use", "id": f"t{i}", "name": "Step", "input": {}})
            continue
        step: dict[str, Any] = {"label": label}
        if rng.random() < 0.6:
            step["at_once"] = "answer"
        else:
            step["at_once"] = rng.choice(["decline", "decline", "raise", "fail", "cancel"])
        step["waits"] = rng.choice([0, 0, 1, 2, 3])
        step["then"] = "raise" if rng.random() < 0.1 else "ok"
        name = "Plain" if kind > 0.85 else "Step"
        calls.append({"type": "tool_use", "id": f"t{i}", "name": name, "input": step})
    return calls


def _ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(
        cwd=tmp_path,
        roots=(tmp_path,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="a1", agent_type="main"),
    )


async def _run(
    calls: list[ToolUseBlock], tmp_path: Path, limit: int, cancel_after: int | None
) -> tuple[list[str], int, list[Any], tuple[str, bool]]:
    log = Log()
    tools: dict[str, Tool[Any]] = {"Step": AtOnceTool(log), "Plain": PlainTool(log)}
    turn = TurnResults(calls)
    loop = asyncio.get_running_loop()
    task = loop.create_task(run_tool_calls(turn, tools, _ctx(tmp_path), limit))
    finished_first = False
    if cancel_after is not None:
        for _ in range(cancel_after):
            await asyncio.sleep(0)
        finished_first = task.done()
        task.cancel()
    try:
        await task
        outcome = "returned"
    except asyncio.CancelledError:
        outcome = "cancelled"
    results = [None if r is None else (r.block, r.tool_name) for r in turn.results]
    return log.events, log.most, results, (outcome, finished_first)


@pytest.mark.parametrize("seed", range(60))
async def test_a_group_runs_as_it_did_with_a_task_per_call(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    calls = _turn(rng)
    limit = rng.choice([1, 2, 3, 10])
    cancel_after = rng.choice([None, None, 0, 1, 2, 4])
    new = await _run(calls, tmp_path, limit, cancel_after)
    with monkeypatch.context() as old:
        old.setattr(scheduling, "_answer_at_once", lambda group, turn, ctx: 0)
        reference = await _run(calls, tmp_path, limit, cancel_after)
    assert new[:3] == reference[:3]  # the same calls, in the same order, the same results
    (outcome, finished_first), (reference_outcome, reference_finished) = new[3], reference[3]
    if finished_first and not reference_finished:
        # Every call answered at once: the turn ended in its first step, before the cancel.
        # With a task per call the cancel came after every call had its result (the same
        # results), while the tasks' ends were being reported: it is raised there, and here at
        # the agent's next suspension.
        assert (outcome, reference_outcome) == ("returned", "cancelled")
    else:
        assert (outcome, finished_first) == (reference_outcome, reference_finished)


async def test_the_leading_calls_answered_at_once_make_no_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str | None] = []
    create_task = asyncio.TaskGroup.create_task

    def counted(self: asyncio.TaskGroup, coro: Any, *, name: str | None = None) -> Any:
        made.append(name)
        return create_task(self, coro, name=name)

    monkeypatch.setattr(asyncio.TaskGroup, "create_task", counted)
    steps = [{"label": "a"}, {"label": "b"}, {"label": "c", "at_once": "decline"}, {"label": "d"}]
    calls: list[ToolUseBlock] = [
        {"type": "tool_use", "id": f"t{i}", "name": "Step", "input": step}
        for i, step in enumerate(steps)
    ]
    events, _, results, outcome = await _run(calls, tmp_path, 10, None)
    assert outcome == ("returned", False)
    # c declined, so it and every call after it ran in a task, in their order.
    assert made == ["tool:Step:t2", "tool:Step:t3"]
    assert events == ["at-once:a", "at-once:b", "start:c", "end:c", "at-once:d"]
    assert [r[0]["content"] for r in results] == [
        "answered a (t0)",
        "answered b (t1)",
        "done c",
        "answered d (t3)",
    ]


# -- a session's background launches ---------------------------------------------------------


def _swarm_script(n: int) -> list[dict[str, Any]]:
    launches = [
        agent_call(f"job {i}", "Explore", description=f"bg {i}", run_in_background=True)
        for i in range(n)
    ]
    launches.append(agent_call("fg job", "Explore", description="fg"))  # waits: a task
    launches.append(agent_call("late bg", "Explore", description="bg late", run_in_background=True))
    return [
        {
            "agent_type": "main",
            "turns": [
                {"tool_calls": launches},
                *({"text": "{{last_user}}"} for _ in range(n + 3)),
            ],
        },
        {"agent_type": "Explore", "turns": [{"text": "report for {{prompt}}"}]},
    ]


_DURATION = re.compile(r"duration: \d+ ms")


async def _session_run(tmp_path: Path, home: Path) -> tuple[Any, ...]:
    """What the coordinator was told of its launches, the children's runs and records (agent
    ids, which are random, replaced by the child's description)."""
    model = ScriptedModel.from_dict({"agents": _swarm_script(6)})
    session = Session(SessionOptions(model=model, cwd=tmp_path, home=home, tools=[AgentTool()]))
    result = await session.run("go")
    names = {run.agent_id: run.description for run in result.agents[1:]}

    def normal(text: str) -> str:
        for agent_id, description in names.items():
            text = text.replace(agent_id, f"<{description}>")
        return _DURATION.sub("duration: <ms>", text.replace(str(home), "<home>"))

    main = [r for r in model.requests if r["agent_type"] == "main"]
    last = main[1]["messages"][-1]["content"]
    told = [normal(str(block["content"])) for block in last if block["type"] == "tool_result"]
    runs = sorted(
        (run.description, run.status, run.prompt, run.result_text, run.is_background)
        for run in result.agents[1:]
    )
    records = session.background.records
    assert records is not None and isinstance(records.store, FileStore)
    disk = FileStore(records.store.state)
    stored = []
    for agent_id, description in names.items():
        record = disk.get(agent_id)
        assert record is not None
        stored.append(
            (description, record.status, record.is_background, record.agent_type, record.prompt)
        )
    return told, runs, sorted(stored)


async def test_a_sessions_background_launches_are_the_same_without_their_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str | None] = []
    create_task = asyncio.TaskGroup.create_task

    def counted(self: asyncio.TaskGroup, coro: Any, *, name: str | None = None) -> Any:
        made.append(name)
        return create_task(self, coro, name=name)

    monkeypatch.setattr(asyncio.TaskGroup, "create_task", counted)
    new = await _session_run(tmp_path, tmp_path / "new")
    # The six background launches at once; the foreground call and the one after it in tasks.
    assert [name.split(":")[1] if name else None for name in made] == ["Agent", "Agent"]
    made.clear()
    with monkeypatch.context() as old:
        old.setattr(scheduling, "_answer_at_once", lambda group, turn, ctx: 0)
        reference = await _session_run(tmp_path, tmp_path / "old")
    assert len(made) == 8
    assert new == reference
    told = new[0]
    assert sum("Async agent launched successfully" in text for text in told) == 7
    assert len(new[1]) == 8 and all(run[1] == "completed" for run in new[1])
