"""A plan-mode teammate waits for its lead's approval (docs/teams.md, "Plan approval"): its
ExitPlanMode sends the plan to the lead, the lead's SendMessage answer decides, feedback on a
refusal reaches the teammate, and only an approved teammate leaves plan mode."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import recorded, run_script, tool_call, write_script
from subagents.abort import AbortSignal
from subagents.agents.teams.config import TeamDirectory
from subagents.agents.teams.membership import TeamMembership
from subagents.agents.teams.plan_approval import answered, ask_lead
from subagents.state import ProjectState
from test_teams_e2e import SHUTDOWN_OK, TEAMS_ENV, last_text, stop_then_delete

CAPTURE = {"rid": 'request_id="([^"]+)"'}


def answer(approve: bool, **extra: Any) -> dict[str, Any]:
    message = {
        "type": "plan_approval_response",
        "request_id": "{{capture.rid}}",
        "approve": approve,
        **extra,
    }
    return {"capture": CAPTURE, "tool_calls": [tool_call("SendMessage", to="w1", message=message)]}


@pytest.mark.parametrize("mode", ["in-process", "process"])
def test_the_lead_sends_a_plan_back_then_approves_it(tmp_path: Path, mode: str) -> None:
    spawn = {
        "description": "teammate w1",
        "prompt": "you are w1",
        "subagent_type": "general-purpose",
        "team_name": "alpha",
        "name": "w1",
        "mode": "plan",
    }
    lead = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [tool_call("TeamCreate", team_name="alpha")]},
            {"tool_calls": [{"name": "Agent", "input": spawn}]},
            {"text": "waiting"},
            answer(False, feedback="add a test step"),
            {"text": "sent back"},
            answer(True),
            {"text": "approved"},
            *stop_then_delete("w1"),
        ],
    }
    teammate = {
        "agent_type": "general-purpose",
        "match": "you are w1\\b",
        "turns": [
            {"tool_calls": [tool_call("ExitPlanMode", plan="PLAN-A: 1. edit the file")]},
            {"tool_calls": [tool_call("ExitPlanMode", plan="PLAN-B: 1. edit 2. test")]},
            {"tool_calls": [tool_call("Write", file_path="done.txt", content="done\n")]},
            {"text": "w1 done"},
            SHUTDOWN_OK,
            {"text": "bye"},
        ],
    }
    script = write_script(tmp_path, [lead, teammate])
    env = {**TEAMS_ENV, "SUBAGENTS_TEAMMATE_MODE": mode}
    # acceptEdits: the mode the teammate leaves plan mode for (the lead's), where Write needs no ask.
    result = run_script(script, tmp_path, "--permission-mode", "acceptEdits", env=env, timeout=120)
    assert result.code == 0, result.stderr[-3000:]
    assert result.json()["result"].startswith("Team 'alpha' deleted")

    requests = recorded(tmp_path)
    lead_reads = [last_text(r) for r in requests if r["agent_type"] == "main"]
    w1_reads = [last_text(r) for r in requests if r.get("name") == "w1"]
    first_ask = next(t for t in lead_reads if "PLAN-A" in t)
    assert 'type="plan_approval_request"' in first_ask and "asks you to approve" in first_ask
    assert any("PLAN-B" in t for t in lead_reads)
    refused, approved, wrote = w1_reads[1:4]
    assert "not approved" in refused and "add a test step" in refused
    assert "still in plan mode" in refused
    assert "approved (by the team lead)" in approved and "PLAN-B" in approved
    assert "done.txt" in wrote and "denied" not in wrote.lower()
    assert (tmp_path / "done.txt").read_text() == "done\n", "approved, it left plan mode"


async def test_a_teammate_stopped_while_its_plan_waits_ends_the_wait(tmp_path: Path) -> None:
    team = TeamMembership(
        team_name="alpha", name="w1", directory=TeamDirectory(ProjectState.for_cwd(tmp_path))
    )
    abort = AbortSignal()
    waiting = asyncio.create_task(ask_lead(team, "PLAN", abort))
    while not (sent := team.mailbox("team-lead").unread()):
        await asyncio.sleep(0.01)
    ((_, request),) = sent
    assert request["type"] == "plan_approval_request" and "PLAN" in request["text"]
    answered(team, {"type": "plan_approval_response", "request_id": "other", "approve": True})
    abort.abort("the lead is gone")
    approved, why = await asyncio.wait_for(waiting, 5)
    assert not approved and why == "stopped while waiting for the team lead (the lead is gone)"
    assert team.approvals == {}
