"""An ask answered "yes, and don't ask again" holds for every agent of the session, as Claude
Code's session rules hold for its subagents: the agent that asked, its parent, its running
siblings and the children started later (``PermissionChecker.family``,
``AskAnswer.added_rules``); a process teammate's session gets the rule through its relay."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from cli_helpers import agent_call, tool_call, write_script
from subagents.permissions.checker import (
    AskAnswer,
    AskCallback,
    PermissionChecker,
    PermissionRequest,
)
from subagents.permissions.context import PermissionContext
from subagents.permissions.rules import PermissionRule, parse_rule
from subagents.session import Session, SessionOptions, SessionResult
from test_teams_permission_relay import teammate_asking_script, teams_env  # noqa: F401

TOUCH = parse_rule("Bash(touch:*)")


def _asker(asks: list[str], rules: tuple[PermissionRule, ...] = (TOUCH,)) -> AskCallback:
    async def ask(request: PermissionRequest) -> AskAnswer:
        asks.append(str(request.input.get("command")))
        return AskAnswer(allow=True, added_rules=rules)

    return ask


async def _run(tmp_path: Path, script: Path, ask: AskCallback, *, timeout: float) -> SessionResult:
    """The session on ``script`` with ``ask`` as its user, to its end."""
    options = SessionOptions(
        model=f"scripted:{script}",
        cwd=tmp_path,
        home=tmp_path / "home",
        load_settings=False,
        ask_callback=ask,
    )
    return await asyncio.wait_for(Session(options).run("go"), timeout)


async def test_a_childs_session_rule_holds_for_the_child_its_parent_and_later_children(
    tmp_path: Path,
) -> None:
    main = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [agent_call("first child", "general-purpose")]},
            {"tool_calls": [tool_call("Bash", command="touch main.txt")]},
            {"tool_calls": [agent_call("second child", "general-purpose")]},
            {"text": "done"},
        ],
    }
    first = {
        "agent_type": "general-purpose",
        "match": "first child",
        "turns": [
            {"tool_calls": [tool_call("Bash", command="touch one.txt")]},
            {"tool_calls": [tool_call("Bash", command="touch two.txt")]},
            {"text": "first done"},
        ],
    }
    second = {
        "agent_type": "general-purpose",
        "match": "second child",
        "turns": [{"tool_calls": [tool_call("Bash", command="touch three.txt")]}, {"text": "ok"}],
    }
    asks: list[str] = []
    result = await _run(
        tmp_path, write_script(tmp_path, [main, first, second]), _asker(asks), timeout=60
    )
    assert result.subtype == "success", result.payload
    assert asks == ["touch one.txt"]  # asked once; the rule answered the other three
    for name in ("one.txt", "two.txt", "main.txt", "three.txt"):
        assert (tmp_path / name).exists(), name


async def test_an_answer_without_a_rule_asks_again(tmp_path: Path) -> None:
    main = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [tool_call("Bash", command="touch one.txt")]},
            {"tool_calls": [tool_call("Bash", command="touch two.txt")]},
            {"text": "done"},
        ],
    }
    asks: list[str] = []
    result = await _run(
        tmp_path, write_script(tmp_path, [main]), _asker(asks, rules=()), timeout=60
    )
    assert result.subtype == "success", result.payload
    assert asks == ["touch one.txt", "touch two.txt"]


def test_a_session_rule_reaches_running_checkers_and_updates_keep_modes_apart(
    tmp_path: Path,
) -> None:
    root = PermissionChecker(context=PermissionContext(project_root=tmp_path))
    child = root.for_child(PermissionContext(project_root=tmp_path, mode="plan"))
    grandchild = child.for_child(child.context)
    grandchild.add_session_rules((TOUCH,))
    for checker in (root, child, grandchild):
        assert [str(r) for r in checker.context.allow] == ["Bash(touch:*)"]
    grandchild.add_session_rules((TOUCH,))  # again: not added twice
    assert len(root.context.allow) == 1
    update = {"type": "addRules", "behavior": "deny", "rules": [{"toolName": "WebFetch"}]}
    root.apply_updates([update, {"type": "setMode", "mode": "acceptEdits"}], lambda _w: None)
    assert root.context.mode == "acceptEdits" and child.context.mode == "plan"
    assert [str(r) for r in grandchild.context.deny] == ["WebFetch"]
    with pytest.raises(KeyError):
        child.apply_updates([{"type": "addRules", "behavior": "ask"}], lambda _w: None)
    assert child.context.ask == () and root.context.ask == ()  # all or none


async def test_a_process_teammate_keeps_the_rule_its_leads_user_granted(
    tmp_path: Path,
    teams_env: None,  # noqa: F811
) -> None:
    script = teammate_asking_script(tmp_path, ("touch one.txt", "touch two.txt"))
    asks: list[str] = []
    result = await _run(tmp_path, script, _asker(asks), timeout=120)
    assert result.subtype == "success", result.payload
    assert asks == ["touch one.txt"]
    assert (tmp_path / "one.txt").exists() and (tmp_path / "two.txt").exists()


async def test_a_rule_granted_to_a_process_teammate_holds_for_the_lead_too(
    tmp_path: Path,
    teams_env: None,  # noqa: F811
) -> None:
    """A library callback only returns the rule: the relay adds it to the lead's session as
    the terminal UI and the SDK do (before, the lead asked again for its own call)."""
    script = teammate_asking_script(tmp_path, ("touch one.txt", "touch two.txt"))
    spec = json.loads(script.read_text())
    lead = spec["agents"][0]["turns"]
    lead[-1:] = [{"tool_calls": [tool_call("Bash", command="touch three.txt")]}, lead[-1]]
    script.write_text(json.dumps(spec))
    asks: list[str] = []
    result = await _run(tmp_path, script, _asker(asks), timeout=120)
    assert result.subtype == "success", result.payload
    assert asks == ["touch one.txt"]
    assert all((tmp_path / f"{n}.txt").exists() for n in ("one", "two", "three"))
