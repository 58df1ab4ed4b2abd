"""A prompt, a streamed answer, a tool call: the interactive session's chat."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_helpers import SIZE, answers, app_for, notices, requests, send, tool_lines, until

from subagents.tui.chat import AssistantMessage, ToolLine


async def test_a_prompt_gets_a_streamed_answer_and_a_tool_call_line(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    words = " ".join(f"word{i}" for i in range(12))
    app = app_for(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [{"name": "Read", "input": {"file_path": "notes.txt"}}]},
                    {"text": f"**Read it.** {words}", "stream_ms": 1200},
                ],
            }
        ],
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"look at notes")
        await pilot.press("enter")
        await until(lambda: answers(app), what="the answer to start streaming")
        partial = answers(app)[0]
        assert partial and partial != f"**Read it.** {words}", "the answer arrives in pieces"
        await until(lambda: answers(app) == [f"**Read it.** {words}"], what="the whole answer")
        rendered = app.query(AssistantMessage).last()
        await until(lambda: rendered.query("MarkdownBlock"), what="the answer's Markdown blocks")
        assert "Read it." in str(rendered.query("MarkdownBlock").first().render())
        lines = tool_lines(app)
        assert len(lines) == 1 and lines[0].startswith("✓ Read(notes.txt)")
        line = app.query_one(ToolLine)
        assert line.collapsed, "a tool call is one collapsed line"
        await pilot.click("ToolLine CollapsibleTitle")
        await until(lambda: not line.collapsed, what="the line to expand")
        assert "beta" in str(line.output.render()), "expanded, it shows the result"
        await until(lambda: not app.conversation.busy)
    sent = requests(tmp_path)
    assert "look at notes" in str(sent[0]["messages"][-1]["content"])
    assert "alpha" in str(sent[1]["messages"][-1]["content"])


async def test_a_compaction_is_a_notice_and_its_summary_is_not_an_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_AUTOCOMPACT_TOKENS", "6000")
    big = tmp_path / "big.txt"
    big.write_text("".join(f"line {i:04d} {'x' * 90}\n" for i in range(400)))
    app = app_for(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [{"name": "Read", "input": {"file_path": str(big)}}]},
                    {"text": "final answer"},
                ],
            },
            {"agent_type": "compact", "turns": [{"text": "SUMMARY of big.txt", "stream_ms": 200}]},
        ],
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"read it", "enter")
        # The turn's events reach the widgets through the app's message queue, after the turn:
        # wait for what it shows too (a CI run once read the notices before they were mounted).
        await until(
            lambda: (
                not app.conversation.busy
                and app.conversation.last is not None
                and "context compacted" in notices(app)
                and answers(app)
            ),
            what="the turn's end, its compaction notice and its answer",
        )
        assert "context compacted (auto, summary)" in notices(app)
        assert answers(app) == ["final answer"], "the summary is not shown as the answer"
    assert [r["agent_type"] for r in requests(tmp_path)] == ["main", "compact", "main"]


async def test_slash_compact_summarises_between_turns_and_the_next_turn_continues_from_it(
    tmp_path: Path,
) -> None:
    app = app_for(
        tmp_path,
        [
            {"agent_type": "main", "turns": [{"text": "first answer"}, {"text": "second"}]},
            {"agent_type": "compact", "turns": [{"text": "SUMMARY-5c1d of the talk"}]},
        ],
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"hello there", "enter")
        await until(lambda: answers(app) == ["first answer"] and not app.conversation.busy)
        await send(app, pilot, "/compact keep the greeting")
        await until(lambda: "Compacted:" in notices(app), what="the /compact reply")
        assert "context compacted (manual, summary)" in notices(app)
        await pilot.press(*"and now", "enter")
        await until(lambda: answers(app)[-1:] == ["second"] and not app.conversation.busy)
    main_1, summary, main_2 = requests(tmp_path)
    assert [r["agent_type"] for r in (main_1, summary, main_2)] == ["main", "compact", "main"]
    assert "keep the greeting" in str(summary["messages"])
    assert "SUMMARY-5c1d" in str(main_2["messages"]) and "and now" in str(main_2["messages"])
    assert "hello there" not in str(main_2["messages"]), "the summary replaced the history"


async def test_slash_compact_before_any_turn_says_why_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    app = app_for(tmp_path, [{"agent_type": "main", "turns": [{"text": "fine"}]}])
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "/compact")
        await until(lambda: "nothing to compact yet" in notices(app), what="the refusal")
        await pilot.press(*"hi", "enter")
        await until(lambda: answers(app) == ["fine"] and not app.conversation.busy)
