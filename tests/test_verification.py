"""Verification: evidence from tool metadata, the verdict in metadata, the coordinator reminder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from subagents.agents.agent_run import AgentRun
from subagents.agents.verification import (
    VerificationTracker,
    collect_evidence,
    verification_metadata,
)
from subagents.config import RuntimeConfig
from subagents.events import AgentRef
from subagents.messages import message_text
from subagents.models.scripted import ScriptedModel
from subagents.session import Session, SessionOptions, SessionResult


def call(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"name": name, "input": tool_input}


def delegate(agent_type: str, prompt: str) -> dict[str, Any]:
    return call("Agent", description="a task", prompt=prompt, subagent_type=agent_type)


async def run_script(
    tmp_path: Path, agents: list[dict[str, Any]]
) -> tuple[SessionResult, ScriptedModel, Session]:
    model = ScriptedModel.from_dict({"agents": agents})
    options = SessionOptions(
        model=model,
        cwd=tmp_path,
        config=RuntimeConfig(),
        transcripts=False,
        permission_mode="bypassPermissions",
        load_settings=False,
    )
    session = Session(options)
    result = await session.run("coordinate")
    assert result.subtype == "success", result.payload
    model.assert_complete()
    return result, model, session


def agent_metadata(result: SessionResult) -> list[dict[str, Any]]:
    main = result.agents[0]
    outputs = [c.output for c in main.stats.call_outputs if c.tool_name == "Agent"]
    return [o.metadata or {} for o in outputs if o is not None]


async def test_evidence_comes_from_real_write_and_bash_calls_not_prose(tmp_path: Path) -> None:
    worker_turns = [
        {"tool_calls": [call("Write", file_path="b.txt", content="b")]},
        {"tool_calls": [call("Write", file_path="a.txt", content="a")]},
        {"tool_calls": [call("Write", file_path="a.txt", content="a again")]},
        {"tool_calls": [call("Bash", command="echo built")]},
        {"tool_calls": [call("Bash", command="exit 3")]},
        # The prose claims a command and a file that never happened.
        {"text": "Ran `pytest` (exit 0) and changed z.txt. All good."},
    ]
    result, _, _ = await run_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [{"tool_calls": [delegate("general-purpose", "do")]}, {"text": "ok"}],
            },
            {"agent_type": "general-purpose", "turns": worker_turns},
        ],
    )
    (worker,) = [run for run in result.agents if run.agent_type == "general-purpose"]
    evidence = collect_evidence(worker)
    assert [Path(p).name for p in evidence["files_changed"]] == ["a.txt", "b.txt"]
    assert all(Path(p).is_absolute() for p in evidence["files_changed"])
    assert evidence["commands"] == [
        {"command": "echo built", "exit_code": 0},
        {"command": "exit 3", "exit_code": 3},
    ]
    assert (tmp_path / "a.txt").read_text() == "a again"
    # A non-verification child's result carries no verdict.
    assert "verification" not in agent_metadata(result)[0]


async def test_verification_child_result_carries_verdict_and_evidence(tmp_path: Path) -> None:
    result, _, _ = await run_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [{"tool_calls": [delegate("verification", "check")]}, {"text": "ok"}],
            },
            {
                "agent_type": "verification",
                "turns": [
                    {"tool_calls": [call("Bash", command="test -d .")]},
                    {"tool_calls": [call("Bash", command="test -e missing.txt")]},
                    {"text": "Checked the tree; missing.txt is absent.\n\nVERDICT: PARTIAL"},
                ],
            },
        ],
    )
    (metadata,) = agent_metadata(result)
    assert metadata["agentType"] == "verification"
    assert metadata["verification"] == {
        "verdict": "PARTIAL",
        "evidence": {
            "files_changed": [],
            "commands": [
                {"command": "test -d .", "exit_code": 0},
                {"command": "test -e missing.txt", "exit_code": 1},
            ],
        },
    }


def test_an_ambiguous_report_has_no_verdict() -> None:
    run = AgentRun(ref=AgentRef(agent_id="v1", agent_type="verification"))
    run.result_text = "VERDICT: PASS\nVERDICT: FAIL"
    assert verification_metadata(run)["verdict"] is None
    run.result_text = "all fine\n**VERDICT: FAIL**"
    assert verification_metadata(run) == {
        "verdict": "FAIL",
        "evidence": {"files_changed": [], "commands": []},
    }


async def test_reminder_reaches_the_coordinator_after_three_delegations(tmp_path: Path) -> None:
    main_turns = [{"tool_calls": [delegate("Explore", f"look {i}")]} for i in range(3)] + [
        {"tool_calls": [delegate("verification", "verify the three")]},
        {"tool_calls": [delegate("Explore", "look 3")]},
        {"text": "done"},
    ]
    result, model, session = await run_script(
        tmp_path,
        [
            {"agent_type": "main", "turns": main_turns},
            {"agent_type": "Explore", "turns": [{"text": "found it"}]},
            {"agent_type": "verification", "turns": [{"text": "VERDICT: PASS"}]},
        ],
    )
    main_requests = [r for r in model.requests if r["agent_type"] == "main"]
    assert len(main_requests) == 6
    last_texts = [message_text(r["messages"][-1]) for r in main_requests]
    with_reminder = [i for i, text in enumerate(last_texts) if "`verification` agent" in text]
    # Three completed delegations, then the very next request carries the reminder, once.
    assert with_reminder == [3]
    reminder = last_texts[3]
    assert "`verification` agent" in reminder and "independently" in reminder
    # The verification child reset the count; one delegation after it is not enough.
    assert session.verification.completed == 1
    assert session.verification.issued == 1
    assert agent_metadata(result)[3]["verification"]["verdict"] == "PASS"


def test_tracker_counts_resets_and_does_not_repeat_a_pending_reminder() -> None:
    tracker = VerificationTracker()
    for _ in range(2):
        tracker.note_completed("Explore")
        assert tracker.reminder() is None
    tracker.note_completed("general-purpose")
    text = tracker.reminder()
    assert text is not None and text.startswith("<system-reminder>")
    assert text.rstrip().endswith("</system-reminder>")
    tracker.note_completed("Explore")
    assert tracker.reminder() is None  # still pending
    tracker.delivered()
    for _ in range(2):
        tracker.note_completed("Explore")
    assert tracker.reminder() is None
    tracker.note_completed("verification")
    assert (tracker.completed, tracker.pending) == (0, False)
    for _ in range(3):
        tracker.note_completed("Plan")
    assert tracker.reminder() is not None
    assert tracker.issued == 2


async def test_the_reminder_rides_with_a_background_childs_notification(tmp_path: Path) -> None:
    """The reminder is queued the moment the third child completes, but that child's notification
    waits for its durable terminal write: the coordinator, idle after its answer, must not be
    woken by the reminder alone (a model call spent on nothing), but get both in one message."""
    launches = [
        call(
            "Agent",
            description=f"job {i}",
            prompt=f"job {i}",
            subagent_type="Explore",
            run_in_background=True,
        )
        for i in range(3)
    ]
    children = [
        # Apart in time, so each notification wakes the idle coordinator on its own.
        {"agent_type": "Explore", "match": f"job {i}", "turns": [{"text": f"found {i}"}]}
        for i in range(3)
    ]
    for i, child in enumerate(children):
        child["turns"][0]["delay_ms"] = 60 * (i + 1)
    model = ScriptedModel.from_dict(
        {
            "agents": [
                {"agent_type": "main", "turns": [{"tool_calls": launches}] + [{"text": "ok"}] * 5},
                *children,
            ]
        }
    )
    options = SessionOptions(
        model=model,
        cwd=tmp_path,
        home=tmp_path / "home",  # durable records: a notification follows its terminal write
        permission_mode="bypassPermissions",
        load_settings=False,
        background_wait_ms=5000,
    )
    result = await Session(options).run("coordinate")
    assert result.subtype == "success", result.payload
    woken = [r for r in model.requests if r["agent_type"] == "main"][2:]
    texts = [message_text(r["messages"][-1]) for r in woken]
    # Every wake carries a notification: none is spent on the reminder alone.
    assert all("<task-notification>" in text for text in texts), texts
    assert sum(text.count("<task-notification>") for text in texts) == 3
    # The reminder comes once, with the input that woke the coordinator, after it. (Which one
    # depends on timing: under load the third child may end before the second's notification
    # is drained, and the reminder then rides with that one.)
    with_reminder = [text for text in texts if "`verification` agent" in text]
    assert len(with_reminder) == 1, texts
    assert with_reminder[0].rindex("</task-notification>") < with_reminder[0].index(
        "`verification` agent"
    )
