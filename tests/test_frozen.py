"""``frozen.new_frozen``: the same value as the frozen dataclass's ``__init__`` makes, cheaper."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from subagents.agents.agent_run import AgentRun
from subagents.agents.durability import run_stats
from subagents.agents.notifications import AgentNotice
from subagents.events import AgentRef
from subagents.frozen import new_frozen
from subagents.store.process_identity import ProcessIdentity
from subagents.store.records import (
    ConfigSnapshot,
    Lineage,
    RunResult,
    RunStats,
    SidecarRecord,
    TokenUsage,
)

RECORD: dict[str, Any] = {
    "agent_id": "a00000001",
    "agent_type": "worker",
    "description": "d",
    "prompt": "p",
    "session_id": "s",
    "project_path": "/p",
    "parent_agent_id": "s",
    "is_background": True,
    "tool_use_id": "toolu_1",
    "lineage": Lineage(root_agent_id="a00000001"),
    "config": ConfigSnapshot(model="m", tools=("Read",)),
    "created_at": 1.5,
    "last_active_at": 1.5,
    "process": ProcessIdentity(pid=7, start_identity="x", hostname="h"),
    "output_path": "/o",
    "transcript_path": "/t",
    "worktree": None,
}

CASES: list[tuple[type, dict[str, Any]]] = [
    (SidecarRecord, RECORD),
    (SidecarRecord, {k: v for k, v in RECORD.items() if k not in ("config", "worktree")}),
    (Lineage, {"root_agent_id": "a1", "resumed_from": "a0", "resume_depth": 2}),
    (RunResult, {"text": "done", "reason": "completed", "error": None}),
    (TokenUsage, {"input_tokens": 1, "output_tokens": 2, "cache_read_input_tokens": 3}),
    (RunStats, {"num_turns": 5, "usage": TokenUsage(output_tokens=4), "cost_usd": 0.5}),
    # every field given: the dict becomes the instance's own
    (TokenUsage, {**dict.fromkeys(dataclasses.asdict(TokenUsage()), 0), "input_tokens": 3}),
    (
        RunStats,
        {
            "num_turns": 5,
            "total_tool_use_count": 4,
            "total_tokens": 9,
            "usage": TokenUsage(output_tokens=9),
            "total_duration_ms": 12,
            "cost_usd": 0.25,
        },
    ),
    (
        AgentNotice,
        {
            "task_id": "a1",
            "description": "d",
            "agent_type": "worker",
            "status": "completed",
            "result": "r",
            "error": None,
            "output_file": "/o",
            "tool_uses": 4,
            "total_tokens": 9,
            "duration_ms": 3,
        },
    ),
]


@pytest.mark.parametrize(("cls", "values"), CASES)
def test_the_value_is_the_one_init_makes(cls: type, values: dict[str, Any]) -> None:
    made, expected = new_frozen(cls, dict(values)), cls(**values)
    assert type(made) is cls
    assert made == expected and repr(made) == repr(expected) and hash(made) == hash(expected)
    for field in dataclasses.fields(cls):
        assert getattr(made, field.name) == getattr(expected, field.name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.description = "changed"  # still frozen


def test_a_default_factory_gives_each_value_its_own_object() -> None:
    values = {k: v for k, v in RECORD.items() if k != "config"}
    first, second = new_frozen(SidecarRecord, values), new_frozen(SidecarRecord, values)
    assert first.config == ConfigSnapshot() and first.to_dict() == SidecarRecord(**values).to_dict()
    assert first.config is not second.config


def test_a_wrong_or_missing_field_fails_as_init_would() -> None:
    with pytest.raises(TypeError, match="agent_idd"):
        new_frozen(SidecarRecord, {**RECORD, "agent_idd": "x"})
    with pytest.raises(TypeError, match="agent_type"):
        new_frozen(SidecarRecord, {k: v for k, v in RECORD.items() if k != "agent_type"})


def test_only_plain_frozen_dataclasses_are_taken() -> None:
    @dataclasses.dataclass
    class Mutable:
        x: int = 0

    @dataclasses.dataclass(frozen=True)
    class Checked:
        x: int = 0

        def __post_init__(self) -> None:
            raise AssertionError("never skipped")

    for cls in (Mutable, Checked):
        with pytest.raises(TypeError, match="new_frozen"):
            new_frozen(cls, {"x": 1})


def test_every_field_given_makes_the_dict_the_values_own() -> None:
    """The fast path: a dict naming every field is taken as the instance's dict (no copy); a
    dict naming one field too many or too few still goes to ``__init__``."""
    values = {"text": "done", "reason": "completed", "error": None}
    made = new_frozen(RunResult, values)
    assert made.__dict__ is values and made == RunResult(**values)
    with pytest.raises(TypeError, match="extra"):
        new_frozen(RunResult, {**values, "extra": 1})
    assert new_frozen(RunResult, {"text": "t"}) == RunResult(text="t")


def test_a_terminal_writes_stats_are_the_values_init_makes() -> None:
    """``durability.run_stats`` (built with ``new_frozen``) against the frozen ``__init__``."""
    run = AgentRun(ref=AgentRef(agent_id="a00000001", agent_type="w"), duration_ms=40)
    run.stats.num_turns, run.stats.tool_use_count, run.stats.cost_usd = 3, 2, 0.125
    run.stats.usage.input_tokens, run.stats.usage.cache_read_input_tokens = 10, 7
    usage = TokenUsage(input_tokens=10, cache_read_input_tokens=7)
    expected = RunStats(
        num_turns=3,
        total_tool_use_count=2,
        total_tokens=17,
        usage=usage,
        total_duration_ms=40,
        cost_usd=0.125,
    )
    made = run_stats(run)
    assert made == expected and hash(made) == hash(expected) and repr(made) == repr(expected)
    assert made.to_dict() == expected.to_dict()
