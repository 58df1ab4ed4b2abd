"""Permission prompts in the interactive session: allow, deny with a reason, a background
child's ask answered while the main agent is idle, allow for the session, allow always."""

from __future__ import annotations

import json
from pathlib import Path

from tui_helpers import SIZE, app_for, notices, requests, tool_lines, until

from subagents.tui.ask_bar import AskBar


def _ask_shown(app: object) -> bool:
    bar = app.query_one(AskBar)  # type: ignore[attr-defined]
    return bar.shown is not None


async def test_an_ask_allowed_and_one_denied_with_a_reason(tmp_path: Path) -> None:
    app = app_for(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [{"name": "Bash", "input": {"command": "touch made.txt"}}]},
                    {"tool_calls": [{"name": "Bash", "input": {"command": "rm -rf build"}}]},
                    {"text": "done: {{tool_results}}"},
                ],
            }
        ],
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"make it", "enter")
        await until(lambda: _ask_shown(app), what="the first prompt")
        question = str(app.query_one("#ask-question").render())
        assert "main agent" in question and "touch made.txt" in question
        await pilot.press("1")
        await until(lambda: (tmp_path / "made.txt").exists(), what="the allowed command")
        await until(lambda: _ask_shown(app) and "rm -rf" in app.asks.pending[0].request.subject)
        await pilot.press("4")
        await pilot.press(*"keep the build", "enter")
        await until(lambda: not app.conversation.busy and app.conversation.last is not None)
        assert not app.asks.pending
        assert [t[0] for t in tool_lines(app)] == ["✓", "✗"]
    last = requests(tmp_path)[-1]["messages"][-1]
    assert "denied by the user: keep the build" in json.dumps(last)


async def test_a_background_childs_ask_is_answered_while_the_main_agent_is_idle(
    tmp_path: Path,
) -> None:
    app = app_for(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "Agent",
                                "input": {
                                    "description": "writer",
                                    "prompt": "write the file",
                                    "subagent_type": "general-purpose",
                                    "run_in_background": True,
                                },
                            }
                        ]
                    },
                    {"text": "started it"},
                    {"text": "heard back: {{last_user}}"},
                ],
            },
            {
                "agent_type": "general-purpose",
                "turns": [
                    {
                        "tool_calls": [{"name": "Bash", "input": {"command": "touch bg.txt"}}],
                        "delay_ms": 300,
                    },
                    {"text": "wrote bg.txt"},
                ],
            },
        ],
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"start a writer", "enter")
        await until(lambda: _ask_shown(app), what="the background child's prompt")
        assert not app.conversation.busy, "the main agent's turn is over: it is idle"
        entry = app.asks.pending[0]
        assert entry.request.background and "(background)" in entry.who
        assert "general-purpose" in str(app.query_one("#ask-question").render())
        await pilot.press("1")
        await until(lambda: (tmp_path / "bg.txt").exists(), what="the child's command")
        await until(lambda: "completed" in notices(app), what="the completion notice")
        await until(lambda: any("heard back" in a for a in _answers(app)), what="the wake-up turn")


def _answers(app: object) -> list[str]:
    from tui_helpers import answers

    return answers(app)  # type: ignore[arg-type]


async def test_allow_for_the_session_adds_a_rule_and_always_saves_it(tmp_path: Path) -> None:
    calls = [{"name": "Bash", "input": {"command": f"touch f{i}.txt"}} for i in range(3)]
    app = app_for(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [calls[0]]},
                    {"tool_calls": [calls[1]]},
                    {
                        "tool_calls": [
                            {
                                "name": "WebFetch",
                                "input": {"url": "http://127.0.0.1:9/x", "prompt": "p"},
                            }
                        ]
                    },
                    {"text": "ok"},
                ],
            }
        ],
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"go", "enter")
        await until(lambda: _ask_shown(app))
        assert app.asks.pending[0].rule == "Bash(touch:*)"
        await pilot.press("2")
        await until(lambda: _ask_shown(app) and app.asks.pending[0].request.tool_name == "WebFetch")
        assert (tmp_path / "f1.txt").exists(), "the session rule allowed the second touch"
        await pilot.press("3")
        await until(lambda: not app.conversation.busy and app.conversation.last is not None)
        allow = app.conversation.session.permissions.context.allow  # type: ignore[union-attr]
        assert [str(rule) for rule in allow] == ["Bash(touch:*)", "WebFetch"]
    saved = json.loads((tmp_path / ".claude" / "settings.local.json").read_text())
    assert saved == {"permissions": {"allow": ["WebFetch"]}}
