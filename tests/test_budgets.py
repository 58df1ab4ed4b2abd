"""Budgets for every child, end to end through the CLI on the scripted model (issue 18 item 5).

Every scripted turn reports its usage (1,000 input and 100 output tokens) and ``SUBAGENTS_PRICES``
gives the scripted model a price, so each call costs exactly $0.015: the token and cost budgets
run out after a known number of calls. Each budget ends the child with its own terminal reason,
which the parent reads in the tool result or the notification, and ``json``, the sidecar and
``tasks show`` report, beside the child's cost.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import agent_call, recorded, run_cli, run_script, tool_call, write_script

USAGE = {"input_tokens": 1000, "output_tokens": 100}
PRICES = {"scripted": {"input": 10, "output": 50}}
"""$0.01 for 1,000 input tokens plus $0.005 for 100 output tokens: $0.015 a call."""
ENV = {"SUBAGENTS_PRICES": json.dumps(PRICES)}
CALL_COST = 0.015

BUDGETS: dict[str, tuple[dict[str, Any], int]] = {
    # agent type: (its budget, the model calls it makes before the budget ends it)
    "turns": ({"maxTurns": 2}, 2),
    "tokens": ({"maxTokens": 2500}, 3),  # 1,100 a call: 2,200 < 2,500 <= 3,300
    "cost": ({"maxBudgetUsd": 0.04}, 3),  # $0.015 a call: 0.03 < 0.04 <= 0.045
    "clock": ({"maxWallTimeMs": 300}, 1),  # its first call takes 5 s: cut at 0.3 s
}
REASONS = {
    "turns": "max_turns",
    "tokens": "max_tokens",
    "cost": "max_budget_usd",
    "clock": "max_wall_time",
}


def looping_child(agent_type: str, *, delay_ms: int = 0) -> dict[str, Any]:
    """A child that would call Glob forever: only its budget ends it."""
    turn = {"tool_calls": [tool_call("Glob", pattern="*.none")], "usage": USAGE}
    first = {**turn, "delay_ms": delay_ms} if delay_ms else turn
    return {"agent_type": agent_type, "turns": [first] + [turn] * 9}


def agents_json(**extra: Any) -> str:
    return json.dumps(
        {
            name: {"description": f"{name} budget", "prompt": "Work.", **budget, **extra}
            for name, (budget, _) in BUDGETS.items()
        }
    )


def test_each_budget_ends_a_child_with_its_own_reason(tmp_path: Path) -> None:
    calls = [agent_call(f"job {name}", name, description=name) for name in BUDGETS]
    main = {
        "agent_type": "main",
        "turns": [{"tool_calls": calls, "usage": USAGE}, {"text": "done", "usage": USAGE}],
    }
    children = [looping_child(name, delay_ms=5000 if name == "clock" else 0) for name in BUDGETS]
    script = write_script(tmp_path, [main, *children])
    run = run_script(script, tmp_path, "--agents", agents_json(), env=ENV)
    assert run.code == 0, run.stderr
    result = run.json()
    requests = recorded(tmp_path)
    by_type = {a["agentType"]: a for a in result["agents"][1:]}
    for name, (_, expected_calls) in BUDGETS.items():
        agent = by_type[name]
        assert agent["status"] == "failed" and agent["reason"] == REASONS[name], agent
        made = [r for r in requests if r["agent_type"] == name]
        assert len(made) == expected_calls, name
        answered = 0 if name == "clock" else expected_calls  # the cut call reported nothing
        assert agent["costUsd"] == pytest.approx(CALL_COST * answered)
        assert agent["usage"]["input_tokens"] == 1000 * answered
    # the parent's next request tells it, per child, which budget ran out and how far it got
    results = requests[-1]["messages"][-1]["content"]
    texts = [block["content"] for block in results if block["type"] == "tool_result"]
    assert len(texts) == 4
    assert "ended without completing (max_turns: reached the limit of 2 model calls)" in texts[0]
    assert "(max_tokens: used 3300 of 2500 tokens)" in texts[1]
    assert "(max_budget_usd: spent $0.045000 of $0.04)" in texts[2]
    assert "(max_wall_time: ran " in texts[3] and " of 300 ms)" in texts[3]
    # the session's cost is the main agent's plus every child's
    main_agent = result["agents"][0]
    assert main_agent["costUsd"] == pytest.approx(CALL_COST * 2)


def test_a_background_child_over_its_cost_budget_notifies_once_with_the_reason(
    tmp_path: Path,
) -> None:
    main = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [agent_call("job cost", "cost", run_in_background=True)]},
            {"text": "waiting"},
            {"text": "heard it"},
        ],
    }
    script = write_script(tmp_path, [main, looping_child("cost")])
    run = run_script(script, tmp_path, "--agents", agents_json(), env=ENV)
    assert run.code == 0, run.stderr
    child = run.json()["agents"][1]
    assert (child["reason"], child["costUsd"]) == ("max_budget_usd", pytest.approx(0.045))
    final = [r for r in recorded(tmp_path) if r["agent_type"] == "main"][-1]
    text = json.dumps(final["messages"])
    assert text.count(f"<task-id>{child['agentId']}</task-id>") == 1
    assert "<status>failed</status>" in text
    assert "max_budget_usd: spent $0.045000 of $0.04" in text
    # the durable record says the same, and `tasks show` shows it
    view = json.loads(run_cli("tasks", "show", child["agentId"], "--json", cwd=tmp_path).stdout)
    assert view["result"]["reason"] == "max_budget_usd"
    assert view["stats"]["costUsd"] == pytest.approx(0.045)
    assert view["stats"]["usage"]["input_tokens"] == 3000


def test_a_definition_file_sets_budgets_and_a_resume_keeps_them(tmp_path: Path) -> None:
    agents_dir = tmp_path / ".claude" / "agents"
    agents_dir.mkdir(parents=True)
    (agents_dir / "spender.md").write_text(
        "---\nname: spender\ndescription: spends\nmaxBudgetUsd: 0.02\nmaxTokens: 100000\n---\n"
        "Spend.\n"
    )
    main = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [agent_call("first", "spender")]},
            {
                "capture": {"id": r"agentId: (\w+)"},
                "tool_calls": [agent_call("again", "spender", resume_from="{{capture.id}}")],
            },
            {"text": "done"},
        ],
    }
    script = write_script(tmp_path, [main, looping_child("spender")])
    run = run_script(script, tmp_path, env=ENV)
    assert run.code == 0, run.stderr
    first, resumed = run.json()["agents"][1:]
    # 0.015 < 0.02 <= 0.03: two calls each, the resumed run with its budget afresh
    assert (first["reason"], resumed["reason"]) == ("max_budget_usd", "max_budget_usd")
    assert first["costUsd"] == resumed["costUsd"] == pytest.approx(0.03)
    # a definition file is read as Claude Code reads one: a bad limit is a warning, not an error
    (agents_dir / "odd.md").write_text(
        "---\nname: odd\ndescription: d\nmaxBudgetUsd: lots\nmaxTokens: -5\n---\nbody\n"
    )
    checked = run_cli("agents", "validate", cwd=tmp_path)
    assert checked.code == 0, checked.stderr
    assert "maxBudgetUsd: 'lots' is not a positive number of US dollars" in checked.stderr
    assert "maxTokens: -5 is not a positive whole number of tokens" in checked.stderr
    shown = json.loads(run_cli("agents", "show", "spender", "--json", cwd=tmp_path).stdout)
    assert (shown["maxBudgetUsd"], shown["maxTokens"], shown["maxWallTimeMs"]) == (
        0.02,
        100000,
        None,
    )


def test_a_bad_budget_names_its_field_and_the_rest_loads(tmp_path: Path) -> None:
    bad = {"maxBudgetUsd": "a lot", "maxTokens": 0, "maxWallTimeMs": True, "maxTurns": -1}
    entries = {
        f"w{i}": {"description": "d", "prompt": "p", k: v} for i, (k, v) in enumerate(bad.items())
    }
    entries["fine"] = {"description": "d", "prompt": "p", "maxBudgetUsd": 1}
    run = run_cli("agents", "list", "--json", "--agents", json.dumps(entries), cwd=tmp_path)
    for i, field in enumerate(bad):
        assert f"--agents: w{i}.{field}: " in run.stderr
    names = [agent["name"] for agent in json.loads(run.stdout)]
    assert "fine" in names and not any(name.startswith("w") for name in names)


def test_a_malformed_price_table_is_one_clear_error(tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"agent_type": "main", "turns": [{"text": "hi"}]}])
    run = run_script(script, tmp_path, env={"SUBAGENTS_PRICES": '{"scripted": 3}'})
    assert run.code == 2, run.stderr
    assert "SUBAGENTS_PRICES" in run.stderr and run.stderr.count("\n") == 1
