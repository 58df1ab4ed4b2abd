"""The agent loop: grouping, ordering, concurrency, errors, abort and budgets."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from subagents.abort import AbortSignal
from subagents.events import AgentRef, Event
from subagents.loop.query import Budget, LoopSpec, run_loop
from subagents.messages import Message, Usage, tool_result_text, user_message
from subagents.models.base import MessageDone, ModelRequest, StreamEvent
from subagents.models.retry import ModelCaller, RetryPolicy
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolError, ToolInput, ToolOutput

Turn = list[dict[str, Any]] | str


class ListModel:
    """Serves a fixed list of turns: a string is a final answer, a list is tool calls."""

    name = "list-model"

    def __init__(self, turns: list[Turn], usage: Usage | None = None) -> None:
        self.turns = turns
        self.requests: list[ModelRequest] = []
        self.usage = usage or Usage(input_tokens=10, output_tokens=5)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        turn = self.turns[len(self.requests) - 1]
        if isinstance(turn, str):
            message: Message = {"role": "assistant", "content": [{"type": "text", "text": turn}]}
        else:
            blocks: list[Any] = [
                {
                    "type": "tool_use",
                    "id": f"t{len(self.requests)}_{i}",
                    "name": c["name"],
                    "input": c["input"],
                }
                for i, c in enumerate(turn)
            ]
            message = {"role": "assistant", "content": blocks}
        yield MessageDone(message=message, usage=self.usage)


class SleepInput(ToolInput):
    ms: int = Field(ge=0)
    label: str = ""


class SleepTool(Tool[SleepInput]):
    """Read-only, concurrency-safe: sleeps, then reports its label and finish order."""

    name = "Sleep"
    description = "sleep"
    input_model = SleepInput

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def is_read_only(self, args: SleepInput) -> bool:
        return True

    def is_concurrency_safe(self, args: SleepInput) -> bool:
        return True

    async def call(self, args: SleepInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        self.log.append(f"start:{args.label}")
        await asyncio.sleep(args.ms / 1000)
        self.log.append(f"end:{args.label}")
        return ToolOutput(content=f"slept {args.label}")


class NoteInput(ToolInput):
    text: str


class NoteTool(Tool[NoteInput]):
    """Not concurrency-safe: must run alone."""

    name = "Note"
    description = "write a note"
    input_model = NoteInput

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def call(self, args: NoteInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        self.log.append(f"start:note:{args.text}")
        await asyncio.sleep(0.05)
        self.log.append(f"end:note:{args.text}")
        if args.text == "boom":
            raise RuntimeError("kaboom")
        if args.text == "expected":
            raise ToolError("an expected failure")
        return ToolOutput(content=f"noted {args.text}")


def make_ctx(tmp_path: Path, events: list[Event] | None = None) -> ToolContext:
    sink: Callable[[Event], None] = events.append if events is not None else (lambda e: None)
    return ToolContext(
        cwd=tmp_path,
        roots=(tmp_path,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="a1", agent_type="main"),
        emit=sink,
    )


def spec_for(model: ListModel, tools: list[Tool[Any]], ctx: ToolContext, **kw: Any) -> LoopSpec:
    return LoopSpec(
        caller=ModelCaller(model=model, policy=RetryPolicy(base_delay_s=0.001)),
        system="sys",
        tools=tools,
        ctx=ctx,
        messages=[user_message("go")],
        prompt="go",
        **kw,
    )


def results_of(message: Message) -> list[str]:
    assert isinstance(message["content"], list)
    return [tool_result_text(b) for b in message["content"] if b["type"] == "tool_result"]


async def test_out_of_order_completion_is_returned_in_call_order(tmp_path: Path) -> None:
    log: list[str] = []
    model = ListModel(
        [
            [
                {"name": "Sleep", "input": {"ms": 200, "label": "slow"}},
                {"name": "Sleep", "input": {"ms": 10, "label": "fast"}},
                {"name": "Sleep", "input": {"ms": 100, "label": "mid"}},
            ],
            "done",
        ]
    )
    outcome = await run_loop(spec_for(model, [SleepTool(log)], make_ctx(tmp_path)))
    assert outcome.reason == "completed"
    assert outcome.final_text == "done"
    ends = [e for e in log if e.startswith("end:")]
    assert ends == ["end:fast", "end:mid", "end:slow"]
    assert results_of(outcome.messages[2]) == ["slept slow", "slept fast", "slept mid"]


async def test_safe_calls_run_concurrently_and_unsafe_call_runs_alone(tmp_path: Path) -> None:
    log: list[str] = []
    sleeps = [{"name": "Sleep", "input": {"ms": 300, "label": f"r{i}"}} for i in range(5)]
    calls = [*sleeps[:2], {"name": "Note", "input": {"text": "w"}}, *sleeps[2:]]
    model = ListModel([calls, "ok"])
    started = time.monotonic()
    outcome = await run_loop(spec_for(model, [SleepTool(log), NoteTool(log)], make_ctx(tmp_path)))
    elapsed = time.monotonic() - started
    assert outcome.reason == "completed"
    # Two concurrent groups of ~300 ms plus a 50 ms write: well under 5 x 300 ms.
    assert elapsed < 1.2
    note_start, note_end = log.index("start:note:w"), log.index("end:note:w")
    assert note_end == note_start + 1, "the Write-like call ran alone"
    assert {"end:r0", "end:r1"} <= set(log[:note_start])
    assert {"start:r2", "start:r3", "start:r4"} <= set(log[note_end:])
    assert results_of(outcome.messages[2]) == [
        "slept r0",
        "slept r1",
        "noted w",
        "slept r2",
        "slept r3",
        "slept r4",
    ]


async def test_more_than_ten_safe_calls_are_bounded(tmp_path: Path) -> None:
    log: list[str] = []
    calls = [{"name": "Sleep", "input": {"ms": 50, "label": str(i)}} for i in range(15)]
    model = ListModel([calls, "ok"])
    await run_loop(spec_for(model, [SleepTool(log)], make_ctx(tmp_path)))
    running = peak = 0
    for entry in log:
        running += 1 if entry.startswith("start") else -1
        peak = max(peak, running)
    assert peak == 10


async def test_errors_become_results_and_the_loop_goes_on(tmp_path: Path) -> None:
    log: list[str] = []
    model = ListModel(
        [
            [
                {"name": "Nope", "input": {}},
                {"name": "Sleep", "input": {"ms": -1}},
                {"name": "Note", "input": {"text": "boom"}},
                {"name": "Note", "input": {"text": "expected"}},
                {"name": "Note", "input": {"text": "fine", "extra": 1}},
            ],
            "recovered",
        ]
    )
    outcome = await run_loop(spec_for(model, [SleepTool(log), NoteTool(log)], make_ctx(tmp_path)))
    assert outcome.reason == "completed"
    assert outcome.final_text == "recovered"
    content = outcome.messages[2]["content"]
    assert isinstance(content, list)
    assert all(b.get("is_error") for b in content)
    texts = results_of(outcome.messages[2])
    assert texts[0].startswith("No such tool available: Nope")
    assert "field `ms`" in texts[1]
    assert texts[2] == "Note failed: RuntimeError: kaboom"
    assert texts[3] == "an expected failure"
    assert "field `extra`" in texts[4]


async def test_abort_gives_pending_calls_cancelled_results(tmp_path: Path) -> None:
    log: list[str] = []
    ctx = make_ctx(tmp_path)
    model = ListModel(
        [
            [
                {"name": "Sleep", "input": {"ms": 10, "label": "quick"}},
                {"name": "Sleep", "input": {"ms": 5000, "label": "long"}},
                {"name": "Note", "input": {"text": "never"}},
            ],
            "unreachable",
        ]
    )
    loop_task = asyncio.create_task(run_loop(spec_for(model, [SleepTool(log), NoteTool(log)], ctx)))
    await asyncio.sleep(0.1)
    ctx.abort.abort("user interrupt")
    outcome = await asyncio.wait_for(loop_task, 2)
    assert outcome.reason == "aborted"
    texts = results_of(outcome.messages[-1])
    assert texts[0] == "slept quick"
    assert texts[1].startswith("Tool call cancelled")
    assert texts[2].startswith("Tool call cancelled")
    assert "start:note:never" not in log
    assert len(model.requests) == 1


async def test_external_cancellation_propagates(tmp_path: Path) -> None:
    log: list[str] = []
    model = ListModel([[{"name": "Sleep", "input": {"ms": 5000}}], "x"])
    task = asyncio.create_task(run_loop(spec_for(model, [SleepTool(log)], make_ctx(tmp_path))))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_max_turns_budget(tmp_path: Path) -> None:
    log: list[str] = []
    turns: list[Turn] = [[{"name": "Sleep", "input": {"ms": 0}}]] * 10
    model = ListModel(turns)
    outcome = await run_loop(
        spec_for(model, [SleepTool(log)], make_ctx(tmp_path), budget=Budget(max_turns=3))
    )
    assert outcome.reason == "max_turns"
    assert outcome.stats.num_turns == 3
    assert outcome.stats.tool_use_count == 3


async def test_max_tokens_budget(tmp_path: Path) -> None:
    log: list[str] = []
    turns: list[Turn] = [[{"name": "Sleep", "input": {"ms": 0}}]] * 10
    model = ListModel(turns, usage=Usage(input_tokens=40, output_tokens=10))
    outcome = await run_loop(
        spec_for(model, [SleepTool(log)], make_ctx(tmp_path), budget=Budget(max_tokens=120))
    )
    assert outcome.reason == "max_tokens"
    assert outcome.stats.num_turns == 3
    assert outcome.stats.usage.total == 150


async def test_wall_time_budget_interrupts_a_long_call(tmp_path: Path) -> None:
    log: list[str] = []
    model = ListModel([[{"name": "Sleep", "input": {"ms": 5000}}], "x"])
    started = time.monotonic()
    outcome = await run_loop(
        spec_for(model, [SleepTool(log)], make_ctx(tmp_path), budget=Budget(max_wall_ms=200))
    )
    assert outcome.reason == "max_wall_time"
    assert time.monotonic() - started < 2
    assert results_of(outcome.messages[-1])[0].startswith("Tool call cancelled")


async def test_events_name_the_agent_and_come_in_order(tmp_path: Path) -> None:
    log: list[str] = []
    events: list[Event] = []
    model = ListModel([[{"name": "Sleep", "input": {"ms": 0}}], "fin"])
    await run_loop(spec_for(model, [SleepTool(log)], make_ctx(tmp_path, events)))
    kinds = [e.to_dict()["type"] for e in events]
    assert kinds == ["assistant", "user", "assistant"]
    assert all(e.to_dict()["agent_id"] == "a1" for e in events)


async def test_inbox_items_ride_with_tool_results_and_after_answers(tmp_path: Path) -> None:
    from subagents.loop.inbox import Inbox, InboxItem

    log: list[str] = []
    inbox = Inbox()
    model = ListModel([[{"name": "Sleep", "input": {"ms": 0}}], "first", "second"])

    class Feeding(SleepTool):
        async def call(self, args: SleepInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
            inbox.put(InboxItem(id="n1", text="<note>one</note>"))
            return await super().call(args, ctx, info)

    spec = spec_for(model, [Feeding(log)], make_ctx(tmp_path), inbox=inbox)
    outcome = await run_loop(spec)
    assert outcome.final_text == "first"
    content = outcome.messages[2]["content"]
    assert isinstance(content, list)
    assert content[-1] == {"type": "text", "text": "<note>one</note>"}
    assert not inbox.put(InboxItem(id="n1", text="dup")), "an id is delivered once"
