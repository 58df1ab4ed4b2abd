"""ESC, /tasks, /stop, /clear and /resume, Ctrl+C twice in the interactive session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tui_helpers import SIZE, answers, app_for, notices, until

from cli_helpers import run_cli
from subagents.tui.panel import AgentsPanel


def _agent(description: str, prompt: str, *, background: bool) -> dict[str, Any]:
    return {
        "name": "Agent",
        "input": {
            "description": description,
            "prompt": prompt,
            "subagent_type": "general-purpose",
            "run_in_background": background,
        },
    }


def _rows(app: Any) -> dict[str, Any]:
    return {row.description: row for row in app.board.rows.values()}


def _panel_text(app: Any) -> str:
    panel = app.query_one(AgentsPanel)
    return "\n".join(" ".join(str(cell) for cell in panel.get_row(key)) for key in panel.rows)


async def test_esc_stops_the_turn_and_its_foreground_child_but_not_a_background_one(
    tmp_path: Path,
) -> None:
    app = app_for(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [_agent("bg job", "background work", background=True)]},
                    {"tool_calls": [_agent("fg job", "foreground work", background=False)]},
                    {"text": "after the notification: {{last_user}}"},
                ],
            },
            {"match": "background", "turns": [{"text": "bg finished", "delay_ms": 1500}]},
            {"match": "foreground", "turns": [{"text": "never", "delay_ms": 30000}]},
        ],
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"work", "enter")
        await until(lambda: "fg job" in _rows(app) and "bg job" in _rows(app))
        await until(lambda: "fg job" in _panel_text(app) and "bg job" in _panel_text(app))
        await pilot.press("escape")
        await until(lambda: not app.conversation.busy, what="the interrupted turn to end")
        rows = _rows(app)
        assert rows["fg job"].status == "killed"
        assert rows["bg job"].running and rows["bg job"].background
        assert "Interrupted" in notices(app)
        await until(lambda: not _rows(app)["bg job"].running, what="the background child")
        assert _rows(app)["bg job"].status == "completed"

        await until(lambda: any("bg finished" in a for a in answers(app)), what="the wake-up")


async def test_tasks_lists_a_background_child_and_stop_kills_it(tmp_path: Path) -> None:
    app = app_for(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [_agent("sleeper", "sleep long", background=True)]},
                    {"text": "launched"},
                    {"text": "noted: {{last_user}}"},
                ],
            },
            {"match": "sleep", "turns": [{"text": "woke", "delay_ms": 30000}]},
        ],
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"start", "enter")
        await until(lambda: answers(app) == ["launched"] and not app.conversation.busy)
        await pilot.press(*"/tasks", "enter")
        await until(lambda: "sleeper" in notices(app), what="the /tasks table")
        child = _rows(app)["sleeper"]
        assert f"`{child.agent_id}` | agent | running | sleeper" in notices(app)
        await pilot.press(*f"/stop {child.agent_id[:6]}", "enter")
        await until(lambda: "Stopped task" in notices(app), what="the /stop answer")
        await until(lambda: _rows(app)["sleeper"].status == "killed")
        await pilot.press(*"/tasks", "enter")
        await until(lambda: "| agent | killed | sleeper" in notices(app))


async def test_clear_starts_a_new_session_and_resume_brings_the_old_one_back(
    tmp_path: Path,
) -> None:
    app = app_for(
        tmp_path,
        [{"agent_type": "main", "turns": [{"text": "first answer"}, {"text": "second"}]}],
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"hello", "enter")
        await until(lambda: answers(app) == ["first answer"] and not app.conversation.busy)
        old = app.conversation.session.session_id  # type: ignore[union-attr]
        await pilot.press(*"/clear", "enter")
        await until(lambda: "New conversation" in notices(app))
        assert app.conversation.session.session_id != old  # type: ignore[union-attr]
        assert answers(app) == []
        await pilot.press(*f"/resume {old}", "enter")
        await until(lambda: "Resumed session" in notices(app))
        assert app.conversation.session.session_id == old  # type: ignore[union-attr]
        assert answers(app) == ["first answer"], "the earlier conversation is shown again"


async def test_ctrl_c_once_warns_twice_quits_stopping_children_with_their_records_on_disk(
    tmp_path: Path,
) -> None:
    app = app_for(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [_agent("long job", "long work", background=True)]},
                    {"text": "launched"},
                ],
            },
            {"match": "long work", "turns": [{"text": "never", "delay_ms": 30000}]},
        ],
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"go", "enter")
        await until(lambda: answers(app) == ["launched"] and not app.conversation.busy)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.is_running and _rows(app)["long job"].running, "one Ctrl+C does not quit"
        await pilot.press("ctrl+c")
        await until(lambda: not app.is_running, what="the app to exit")
    assert app.return_code == 0
    listed = run_cli("tasks", "list", "--json", "--cwd", str(tmp_path), cwd=tmp_path)
    assert listed.code == 0, listed.stderr
    (task,) = [t for t in json.loads(listed.stdout) if t.get("description") == "long job"]
    assert task["status"] == "killed"
