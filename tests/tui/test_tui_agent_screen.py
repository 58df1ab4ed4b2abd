"""The panel's agent screen: a child's transcript live, a message to it, a stop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tui_helpers import SIZE, app_for, requests, until

from subagents.tui.chat import ToolLine
from subagents.tui.panel import AgentScreen, AgentsPanel


def _bg(description: str, prompt: str) -> dict[str, Any]:
    return {
        "name": "Agent",
        "input": {
            "description": description,
            "prompt": prompt,
            "subagent_type": "general-purpose",
            "run_in_background": True,
        },
    }


async def _open(app: Any, pilot: Any, description: str) -> AgentScreen:
    panel = app.query_one(AgentsPanel)
    await until(lambda: any(description in str(panel.get_row(k)) for k in panel.rows))
    index = next(i for i, k in enumerate(panel.rows) if description in str(panel.get_row(k)))
    panel.focus()
    panel.move_cursor(row=index)
    await pilot.press("enter")
    await until(lambda: isinstance(app.screen, AgentScreen), what="the agent screen")
    return app.screen  # type: ignore[no-any-return]


async def test_an_agent_screen_shows_its_transcript_takes_a_message_and_stops_it(
    tmp_path: Path,
) -> None:
    glob = {"name": "Glob", "input": {"pattern": "*.md"}}
    app = app_for(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [_bg("listener", "listen"), _bg("sleeper", "sleep")]},
                    {"text": "both started"},
                    {"text": "noted"},
                    {"text": "noted again"},
                ],
            },
            {
                "match": "listen",
                "turns": [
                    {"tool_calls": [glob]},
                    {"tool_calls": [glob], "delay_ms": 3000},
                    {"text": "got: {{last_user}}"},
                ],
            },
            {"match": "sleep", "turns": [{"text": "never", "delay_ms": 30000}]},
        ],
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"go", "enter")
        screen = await _open(app, pilot, "listener")
        await until(lambda: screen.query(ToolLine), what="the child's tool line")
        assert str(screen.query(ToolLine).first().title).startswith(("⏺ Glob", "✓ Glob"))
        await pilot.press("m")
        await until(lambda: app.focused is screen.query_one("#agent-message"))
        await pilot.press(*"also check the docs", "enter")
        await until(lambda: "Message delivered" in _notes(screen))
        await pilot.press("escape")
        sleeper = await _open(app, pilot, "sleeper")
        await pilot.press("s")
        await until(lambda: "Stopped" in _notes(sleeper), what="the stop")
        rows = {r.description: r for r in app.board.rows.values()}
        await until(lambda: rows["sleeper"].status == "killed")
        await until(lambda: rows["listener"].status == "completed")
    listener = [r for r in requests(tmp_path) if r["prompt"] == "listen"]
    last = json.dumps(listener[-1]["messages"][-1])
    assert '<teammate-message from=\\"user\\">\\nalso check the docs' in last


def _notes(screen: AgentScreen) -> str:
    from subagents.tui.chat import Notice

    return "\n".join(n.source for n in screen.query(Notice))
