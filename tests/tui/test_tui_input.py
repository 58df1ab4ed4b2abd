"""The input box (several lines, history), the status line, the other slash commands
(/help, /agents, /model, /permissions), and ``-c`` continuing a session in the UI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tui_helpers import SIZE, answers, app_for, notices, requests, send, until, users

from subagents.tui.commands import COMMANDS
from subagents.tui.prompt import PromptInput


def _status(app: object) -> str:
    return str(app.status_line.render())  # type: ignore[attr-defined]


async def test_a_prompt_of_two_lines_then_up_brings_it_back(tmp_path: Path) -> None:
    app = app_for(
        tmp_path,
        [{"agent_type": "main", "turns": [{"text": "one"}, {"text": "two"}]}],
    )
    async with app.run_test(size=SIZE) as pilot:
        box = app.query_one(PromptInput)
        await pilot.press(*"first line", "ctrl+j", *"second line", "enter")
        await until(lambda: answers(app) == ["one"] and not app.conversation.busy)
        assert box.text == ""
        await pilot.press(*"draft")
        await pilot.press("up")
        assert box.text == "first line\nsecond line", "Up recalls the last prompt"
        await pilot.press("down")
        assert box.text == "draft", "Down past the newest entry gives back what was typed"
        status = _status(app)
        assert "scripted:script.json" in status and "default" in status
        assert "tokens" in status and "$0.0000" in status and "0 agents running" in status
    sent = requests(tmp_path)[0]["messages"][-1]["content"]
    assert "first line\nsecond line" in json.dumps(sent).replace("\\n", "\n")


async def test_help_agents_model_and_permissions(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text(
        "---\nname: reviewer\ndescription: Reviews a diff | carefully\n---\nReview it.\n"
    )
    (agents / "broken.md").write_text("---\nname: [unclosed\n---\n")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"agents": [{"agent_type": "main", "turns": [{"text": "B"}]}]}))
    app = app_for(tmp_path, [{"agent_type": "main", "turns": [{"text": "A"}]}])
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "/help")
        await until(lambda: "`/stop ID`" in notices(app), what="the /help table")
        await send(app, pilot, "/agents")
        await until(lambda: "`reviewer`" in notices(app), what="the /agents table")
        assert "Reviews a diff \\| carefully" in notices(app), "a | in a cell is escaped"
        assert "broken.md" in notices(app), "a definition that failed to load is listed"
        await send(app, pilot, "/permissions allow Bash(git status:*)")
        await until(lambda: "`Bash(git status:*)`" in notices(app))
        await send(app, pilot, "/permissions mode acceptEdits")
        await until(lambda: "Mode: `acceptEdits`" in notices(app))
        await send(app, pilot, "/permissions mode nonsense")
        await until(lambda: "`/permissions`:" in notices(app), what="the refusal")
        assert app.conversation.session.permissions.context.mode == "acceptEdits"  # type: ignore[union-attr]
        await send(app, pilot, f"/model scripted:{other}")
        await until(lambda: "now uses" in notices(app))
        await send(app, pilot, "/bogus")
        await until(lambda: "Unknown command `/bogus`" in notices(app))
        await send(app, pilot, "//etc is a path")
        await until(lambda: answers(app) == ["B"], what="the switched model's answer")
        assert users(app)[-1] == "> /etc is a path", "// sends the text with one /"
        assert "acceptEdits" in _status(app)


async def test_continue_opens_the_last_session_with_its_conversation(tmp_path: Path) -> None:
    turns = [{"text": "first answer"}, {"text": "continued: {{last_user}}"}]
    first = app_for(tmp_path, [{"agent_type": "main", "turns": turns}])
    async with first.run_test(size=SIZE) as pilot:
        await pilot.press(*"hello there", "enter")
        await until(lambda: answers(first) == ["first answer"] and not first.conversation.busy)
        old = first.conversation.session.session_id  # type: ignore[union-attr]
    again = app_for(tmp_path, [{"agent_type": "main", "turns": turns[1:]}], "-c")
    async with again.run_test(size=SIZE) as pilot:
        await until(lambda: "resumed session" in notices(again), what="the replayed history")
        assert again.conversation.session.session_id == old  # type: ignore[union-attr]
        assert users(again) == ["> hello there"] and answers(again) == ["first answer"]
        await pilot.press(*"and now", "enter")
        await until(lambda: len(answers(again)) == 2 and not again.conversation.busy)
    history = json.dumps(requests(tmp_path)[-1]["messages"])
    assert "hello there" in history and "first answer" in history and "and now" in history


async def test_a_command_or_a_turn_that_fails_is_reported_and_the_session_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(_ctx: object, _args: str) -> str:
        raise KeyError("boom")

    monkeypatch.setitem(COMMANDS, "tasks", broken)
    app = app_for(tmp_path, [{"agent_type": "main", "turns": [{"text": "still here"}]}])
    async with app.run_test(size=SIZE) as pilot:
        await send(app, pilot, "/tasks")
        await until(lambda: "`/tasks` failed: KeyError" in notices(app))
        session = app.conversation.session
        assert session is not None
        real_run = session.run

        async def failing_once(prompt: str) -> object:
            monkeypatch.setattr(session, "run", real_run)
            raise LookupError("no such thing")

        monkeypatch.setattr(session, "run", failing_once)
        await send(app, pilot, "first")
        await until(lambda: "the turn failed: LookupError" in notices(app))
        await send(app, pilot, "second")
        await until(lambda: answers(app) == ["still here"], what="the next turn")
        assert app.is_running
