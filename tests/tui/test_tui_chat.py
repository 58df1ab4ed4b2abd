"""A prompt, a streamed answer, a tool call: the interactive session's chat."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_helpers import SIZE, answers, app_for, notices, requests, tool_lines, until

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
        await until(lambda: not app.conversation.busy and app.conversation.last is not None)
        assert "context compacted (auto, summary)" in notices(app)
        assert answers(app) == ["final answer"], "the summary is not shown as the answer"
    assert [r["agent_type"] for r in requests(tmp_path)] == ["main", "compact", "main"]
