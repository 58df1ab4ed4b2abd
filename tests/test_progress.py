"""Headless progress (issue 19 item 5): a line when a child's row changes, not every second."""

from __future__ import annotations

import io
import re
from pathlib import Path

from cli_helpers import agent_call, run_script, tool_call, write_script
from subagents.cli.progress import ProgressPrinter
from subagents.events import (
    AgentRef,
    AssistantEvent,
    InitEvent,
    NotificationEvent,
    ProgressEvent,
    ResultEvent,
    SystemEvent,
)
from subagents.messages import Usage

MAIN = AgentRef(agent_id="main-1", agent_type="main")
CHILD = AgentRef(agent_id="achild001", agent_type="Explore", parent_agent_id="main-1")


def _started(ref: AgentRef, *, background: bool) -> SystemEvent:
    data = {"description": "probe", "background": background, "task_id": ref.agent_id}
    return SystemEvent(agent=ref, subtype="agent_started", data=data)


def _calls(ref: AgentRef, *names: str) -> AssistantEvent:
    content = [
        {"type": "tool_use", "id": f"t{i}", "name": n, "input": {"pattern": "*"}}
        for i, n in enumerate(names)
    ]
    return AssistantEvent(
        agent=ref, message={"role": "assistant", "content": content}, usage=Usage(output_tokens=5)
    )


def _progress(ref: AgentRef, tools: int, tokens: int) -> ProgressEvent:
    data = {"tool_use_count": tools, "total_tokens": tokens, "recent_activities": ["Glob: *"]}
    return ProgressEvent(agent=ref, subtype="agent_progress", data=data)


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_foreground_child_shows_after_two_seconds_and_then_only_on_change() -> None:
    out, clock = io.StringIO(), Clock()
    printer = ProgressPrinter(stream=out, clock=clock)
    printer.event(InitEvent(session_id="main-1", model="m", cwd=".", tools=[], agent=MAIN))
    printer.event(_started(CHILD, background=False))
    printer.board.rows[CHILD.agent_id].started = clock.now
    printer.event(_calls(CHILD, "Glob"))
    assert out.getvalue() == "", "nothing in the first two seconds"
    clock.now += 2.5
    for _ in range(3):  # a progress event each second, nothing new in them
        printer.event(_progress(CHILD, 1, 5))
        clock.now += 1
    assert out.getvalue().count("\n") == 1
    printer.event(_calls(CHILD, "Grep"))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "2 tool uses" in lines[1] and "Grep: *" in lines[1]
    printer.event(ResultEvent(payload={}))  # the turn ended: a foreground child ended with it
    assert "killed" in out.getvalue().splitlines()[-1]


def test_background_children_show_only_with_verbose_and_their_end_too() -> None:
    quiet, loud = io.StringIO(), io.StringIO()
    for stream, verbose in ((quiet, False), (loud, True)):
        printer = ProgressPrinter(stream=stream, verbose=verbose)
        printer.event(_started(CHILD, background=True))
        printer.event(_calls(CHILD, "Glob"))
        printer.event(
            NotificationEvent(agent=CHILD, task_id=CHILD.agent_id, status="completed", summary="")
        )
    assert quiet.getvalue() == ""
    lines = loud.getvalue().splitlines()
    assert [("(background)" in line) for line in lines] == [True, True, True]
    assert lines[-1].endswith("— probe") and "completed" in lines[-1]


def test_on_a_terminal_each_running_child_has_one_line_redrawn_in_place() -> None:
    out = io.StringIO()
    printer = ProgressPrinter(stream=out, verbose=True, live=True)
    other = AgentRef(agent_id="achild002", agent_type="Plan", parent_agent_id="main-1")
    printer.event(_started(CHILD, background=True))
    printer.event(_started(other, background=True))
    printer.event(_calls(CHILD, "Glob"))
    frames = out.getvalue().split("\r")
    last = frames[-1].splitlines()
    assert len(last) == 2 and "1 tool uses" in last[0] and "Plan achild002" in last[1]
    assert "\x1b[1A\x1b[2K" * 2 in frames[-2], "the two earlier lines are wiped first"
    printer.finish()
    assert out.getvalue().endswith("\x1b[1A\x1b[2K" * 2 + "\r")


def test_a_slow_child_prints_a_line_per_change_not_per_second(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [{"tool_calls": [agent_call("slow", "Explore")]}, {"text": "ok"}],
            },
            {
                "agent_type": "Explore",
                "turns": [
                    {"tool_calls": [tool_call("Glob", pattern="*")]},
                    {"text": "finished", "delay_ms": 3400},
                ],
            },
        ],
    )
    run = run_script(script, tmp_path, output_format="text")
    assert run.code == 0, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.startswith("[Explore")]
    # Progress events come every second from 2 s on (two of them here); a line is printed
    # only when something besides the time changed: seen running, its last tokens, its end.
    assert re.match(r"\[Explore a\w{8}\] 1 tool uses · \d+ tokens · [\d.]+ s · Glob: \*", lines[0])
    assert "completed" in lines[-1]
    without_time = [re.sub(r" · [\d.]+ s", "", line) for line in lines]
    assert len(set(without_time)) == len(lines) <= 3, run.stderr


def test_verbose_shows_background_children_headless(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            agent_call(
                                "bg", "Explore", run_in_background=True, description="bg job"
                            )
                        ]
                    },
                    {"text": "launched"},
                    {"text": "done"},
                ],
            },
            {"agent_type": "Explore", "turns": [{"text": "bg result", "delay_ms": 200}]},
        ],
    )
    quiet = run_script(script, tmp_path, output_format="text")
    loud = run_script(script, tmp_path, "--verbose", output_format="text")
    assert quiet.code == loud.code == 0
    assert "(background)" not in quiet.stderr
    shown = [line for line in loud.stderr.splitlines() if "(background)" in line]
    assert shown and "bg job" in shown[-1] and "completed" in shown[-1], loud.stderr
