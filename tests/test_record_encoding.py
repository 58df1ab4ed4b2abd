"""``encode_record``: a record's bytes built from its fields, the parts siblings share encoded
once (``store.record_encoding``) — and always exactly ``json_codec``'s bytes of ``to_dict()``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

from subagents import json_codec
from subagents.store import record_encoding
from subagents.store.capabilities import encode_record
from subagents.store.records import (
    NO_RESULT,
    NO_STATS,
    ConfigSnapshot,
    RunResult,
    RunStats,
    SidecarRecord,
    TokenUsage,
    WorktreeInfo,
)
from subagents.testing.store_conformance import make_record


def written(record: SidecarRecord) -> bytes:
    """What a record's bytes were before ``record_encoding``: ``to_dict`` through ``json_codec``."""
    return json_codec.dumps(record.to_dict()) + b"\n"


@dataclass(kw_only=True, frozen=True)
class Wider(SidecarRecord):
    """A subclass whose JSON form has a field more: encoded through its own ``to_dict``."""

    extra: str = "x"

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "extra": self.extra}


BASE = make_record("a00000001")
SHAPES: dict[str, SidecarRecord] = {
    "running, empty result and stats shared": replace(BASE, result=NO_RESULT, stats=NO_STATS),
    "terminal": replace(
        BASE,
        status="completed",
        ended_at=12.5,
        result=RunResult(text="done\n", reason="completed"),
        stats=RunStats(
            num_turns=3,
            total_tool_use_count=2,
            total_tokens=90,
            usage=TokenUsage(input_tokens=60, output_tokens=30),
            total_duration_ms=1234,
            cost_usd=0.0125,
        ),
        notified=True,
        resumable=True,
    ),
    "no process, no worktree, a parent": replace(
        BASE, process=None, worktree=None, parent_agent_id="parent-1"
    ),
    "kept worktree": replace(BASE, worktree=WorktreeInfo(path="/w", branch="b", outcome="kept")),
    "a full config": replace(
        BASE,
        config=ConfigSnapshot(
            model="claude",
            permission_mode="plan",
            tools=None,
            system_prompt='multi\nline "quoted" \u00e9 \U0001f600 \\ </tag>',
            max_turns=None,
            isolation="worktree",
            definition_source="project",
            definition_path="/p/.claude/agents/x.md",
            thinking={"type": "enabled", "budget_tokens": 1024},
            memory="project",
            memory_only_tools=("Write",),
            max_tokens=100,
            max_wall_ms=5000,
            max_cost_usd=1.5,
        ),
    ),
    "non-ASCII text": replace(BASE, description="caf\u00e9 \u2603", prompt="\u4f60\u597d\n\t"),
    # What orjson refuses: the whole record takes json_codec's path, as before.
    "a lone surrogate in the prompt": replace(BASE, prompt="bad \ud800 char"),
    "a lone surrogate in the shared config": replace(
        BASE, config=ConfigSnapshot(model="m", system_prompt="sys \udcff")
    ),
    "an integer beyond 64 bits": replace(BASE, stats=RunStats(total_tokens=2**70)),
    "a non-string key in thinking": replace(
        BASE,
        config=ConfigSnapshot(model="m", thinking={1: "x"}),  # type: ignore[dict-item]
    ),
    "a subclass": Wider(**{**BASE.__dict__, "extra": "more"}),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_records_bytes_are_its_json_form(shape: str) -> None:
    record = SHAPES[shape]
    assert encode_record(record) == written(record)
    assert encode_record(record) == written(record)  # again: the shared parts from the cache


def test_children_of_one_type_encode_their_shared_config_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A thousand records holding one config snapshot (siblings share it) encode it once, not
    once per record; each record's bytes are still its own."""
    config = ConfigSnapshot(model="m", tools=("Read",), system_prompt="s" * 3000)
    calls = []
    real = ConfigSnapshot.to_dict

    def counted(self: ConfigSnapshot) -> dict[str, Any]:
        calls.append(self)
        return real(self)

    monkeypatch.setattr(ConfigSnapshot, "to_dict", counted)
    records = [replace(BASE, agent_id=f"a{i:08d}", config=config) for i in range(100)]
    encoded = [encode_record(record) for record in records]
    assert [c for c in calls if c is config] == [config]
    monkeypatch.setattr(ConfigSnapshot, "to_dict", real)
    assert encoded == [written(record) for record in records]


def test_the_shared_parts_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """One-off configs (a memory prompt each) cycle out: at most ``SHARED_PARTS`` kept."""
    monkeypatch.setattr(record_encoding, "_parts", {})
    for i in range(3 * record_encoding.SHARED_PARTS):
        record = replace(BASE, config=ConfigSnapshot(model="m", system_prompt=f"prompt {i}"))
        assert encode_record(record) == written(record)
        assert len(record_encoding._parts) <= record_encoding.SHARED_PARTS
