"""A child's terminal write without a changes dict (``DurableRecords.terminal``): the record is
``apply_changes``'s (``records.terminal_record``, its checks in line) and the bytes are
``encode_record``'s — ``json_codec``'s of ``to_dict()`` — also when they come from the template
the child started from (``RunningTemplate.encode_terminal``)."""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path
from typing import Any

import pytest

from subagents import ScriptedModel, Session, SessionOptions, json_codec
from subagents.store import FileStore
from subagents.store.capabilities import encode_record
from subagents.store.durable import DurableRecords
from subagents.store.errors import StoreError
from subagents.store.process_identity import ProcessIdentity
from subagents.store.record_encoding import RunningTemplate
from subagents.store.records import (
    NO_RESULT,
    NO_STATS,
    SCHEMA_VERSION,
    ConfigSnapshot,
    Lineage,
    RunResult,
    RunStats,
    SidecarRecord,
    TokenUsage,
    apply_changes,
    terminal_record,
)


class Text(str):
    """A str subclass: equal to its text, not a plain value."""


class Stats(RunStats):
    pass


def plain_bytes(record: SidecarRecord) -> bytes:
    return json_codec.dumps(record.to_dict()) + b"\n"


def shared(rng: random.Random) -> dict[str, Any]:
    background = rng.random() < 0.7
    return {
        "schema_version": SCHEMA_VERSION,
        "agent_type": rng.choice(["worker", "Explore", "r\u00e9viseur"]),
        "session_id": "session-1",
        "project_path": rng.choice(["/p/project", '/p/"q" \u00e9']),
        "parent_agent_id": rng.choice(["session-1", "a00000007", None]),
        "is_background": background,
        "config": ConfigSnapshot(
            model="m",
            tools=("Read", "Note"),
            system_prompt=rng.choice(["sys", 'multi\nline "q" \U0001f600 </tag>']),
            max_cost_usd=rng.choice([None, 1.5]),
        ),
        "process": rng.choice(
            [ProcessIdentity(pid=4242, start_identity="boot:1 start:2", hostname="host"), None]
        ),
        "worktree": None,
        "status": "running",
        "ended_at": None,
        "result": NO_RESULT,
        "stats": NO_STATS,
        "notified": False,
        "stop_requested": False,
        "restart_recovery": None,
        "resumable": False,
    }


def own(rng: random.Random, index: int) -> dict[str, Any]:
    agent_id = f"a{index:08d}"
    return {
        "agent_id": agent_id,
        "description": rng.choice([f"swarm {index}", 'caf\u00e9 "q" \\ \u2603', ""]),
        "prompt": rng.choice(["job", "\u4f60\u597d\n\tline </result>", "job", "bad \ud800"]),
        "tool_use_id": rng.choice([None, f"toolu_{index}"]),
        "lineage": rng.choice(
            [
                Lineage(root_agent_id=agent_id),
                Lineage(root_agent_id="a00000000", resumed_from="a00000001", resume_depth=2),
            ]
        ),
        "created_at": 1764770000.0 + index / 7,
        "last_active_at": 1764770000.0 + index / 3,
        "output_path": rng.choice([None, f"/tmp/tasks/{agent_id}.output"]),
        "transcript_path": rng.choice([None, f"/s/agents/{agent_id}.jsonl"]),
    }


def a_count(rng: random.Random) -> Any:
    return rng.choice([0, 3, 1010, 2**40, 2**70, -1, 2.0, True, None])


def a_stats(rng: random.Random) -> Any:
    if rng.random() < 0.1:
        return rng.choice([NO_STATS, None, {"numTurns": 1}])
    plain = rng.random() < 0.6
    count = (lambda: rng.randrange(5000)) if plain else (lambda: a_count(rng))
    usage = TokenUsage(
        input_tokens=count(),
        output_tokens=count(),
        cache_creation_input_tokens=count(),
        cache_read_input_tokens=count(),
    )
    kind = Stats if rng.random() < 0.05 else RunStats
    return kind(
        num_turns=count(),
        total_tool_use_count=count(),
        total_tokens=count(),
        usage=usage,
        total_duration_ms=count(),
        cost_usd=rng.choice([0.0, 0.0125, 3.0, math.nan, math.inf, -1.0, 2, None]),  # type: ignore[arg-type]
    )


def a_result(rng: random.Random) -> Any:
    return rng.choice(
        [
            RunResult(text="done", reason="completed", error=None),
            RunResult(text='r\u00e9sultat "q"\n', reason="max_turns", error="boom \u2603"),
            RunResult(text="bad \udfff", reason="failed"),
            NO_RESULT,
            RunResult(text=5, reason="completed"),  # type: ignore[arg-type]
            RunResult(text=Text("t"), reason="completed"),
            RunResult(text="t", reason=3),  # type: ignore[arg-type]
            RunResult(text="t", reason="completed", error=7),  # type: ignore[arg-type]
            None,
        ]
    )


def a_change(rng: random.Random) -> tuple[Any, ...]:
    status = rng.choice(
        ["completed", "failed", "killed", "completed", "running", "bogus", Text("failed"), 1]
    )
    flags = [True, False, True, False, 1, None]
    now = rng.choice([1764770001.5, 1764770002.25, math.nan, 7])
    return status, a_result(rng), a_stats(rng), rng.choice(flags), rng.choice(flags), now


def outcome(make: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        record = make(*args, **kwargs)
    except (StoreError, TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)
    return record


def same_record(a: Any, b: Any) -> bool:
    if not isinstance(a, SidecarRecord) or not isinstance(b, SidecarRecord):
        return bool(a == b)
    return (
        type(a) is type(b)
        and list(vars(a)) == list(vars(b))
        and all(
            type(x) is type(y) and (x == y or x != x)  # (NaN: the same NaN-ness)
            for x, y in zip(vars(a).values(), vars(b).values(), strict=True)
        )
    )


@pytest.mark.parametrize("seed", range(8))
def test_terminal_record_is_apply_changes(seed: int) -> None:
    rng = random.Random(seed)
    for index in range(150):
        template = RunningTemplate(shared(rng))
        values = template.values.copy()
        values.update(own(rng, index))
        record = template.record(values)
        if rng.random() < 0.2:  # already terminal, or another status
            record = apply_changes(record, {"status": rng.choice(["completed", "killed"])}, now=1.0)
        status, result, stats, notified, resumable, now = a_change(rng)
        changes = {
            "status": status,
            "result": result,
            "stats": stats,
            "notified": notified,
            "resumable": resumable,
        }
        fast = outcome(terminal_record, record, status, result, stats, notified, resumable, now)
        reference = outcome(apply_changes, record, changes, now=now)
        assert same_record(fast, reference), (index, changes, now)


@pytest.mark.parametrize("seed", range(8))
def test_terminal_bytes_from_the_template_are_encode_records(seed: int) -> None:
    rng = random.Random(100 + seed)
    from_template = 0
    templates = [RunningTemplate(shared(rng)) for _ in range(3)]  # siblings share theirs
    for index in range(200):
        template = rng.choice(templates)
        values = template.values.copy()
        values.update(own(rng, index))
        record = template.record(values)
        assert template.encode(values) in (None, plain_bytes(record))
        copied = rng.random()
        if copied < 0.1:  # a shared field replaced by an equal value, or another one
            names = ["session_id", "project_path", "parent_agent_id", "agent_type", "config"]
            name = rng.choice([*names, "notified", "schema_version"])
            value = record.__dict__[name]
            if rng.random() < 0.5:  # (2.0 == 2 and 1 == True, but they encode otherwise)
                others = {"config": ConfigSnapshot(model="other"), "notified": 1}
                value = {**others, "schema_version": 2.0}.get(name, "x")
            elif isinstance(value, str):
                value = "".join(list(value))
            elif isinstance(value, ConfigSnapshot):
                value = dataclasses.replace(value)
            record = apply_changes(record, {"description": "x"}, now=1.0)
            record.__dict__[name] = value  # (no store path does this: the check must notice)
        elif copied < 0.2:  # changed since the start as a store change would
            record = apply_changes(
                record,
                rng.choice(
                    [
                        {"is_background": not record.is_background},
                        {"stop_requested": True},
                        {"last_active_at": 1764770009.5},
                        {"output_path": "/tmp/moved.output"},
                        {"restart_recovery": "interrupted"},
                        {"process": ProcessIdentity(pid=7, start_identity="s", hostname="h")},
                        {"process": None},
                    ]
                ),
                now=1.0,
            )
        if rng.random() < 0.6:  # a plain change, as a finished child makes
            status = rng.choice(["completed", "failed", "killed"])
            result = rng.choice(
                [RunResult(text="done", reason="completed"), RunResult(text="\u00e9", reason="x")]
            )
            stats = RunStats(
                num_turns=rng.randrange(9),
                total_tokens=rng.randrange(5000),
                usage=TokenUsage(input_tokens=rng.randrange(99), output_tokens=rng.randrange(99)),
                total_duration_ms=rng.randrange(10**6),
                cost_usd=rng.choice([0.0, 0.0125]),
            )
            notified, resumable, now = rng.random() < 0.5, True, 1764770001.5
        else:
            status, result, stats, notified, resumable, now = a_change(rng)
        try:
            done = terminal_record(record, status, result, stats, notified, resumable, now)
        except StoreError:
            continue
        if copied < 0.1 and name == "notified":
            done.__dict__["notified"] = value  # (a value only a direct change could leave)
        data = template.encode_terminal(done)
        assert data is None or data == encode_record(done) == plain_bytes(done), index
        if data is not None:
            from_template += 1
    assert from_template > 50  # many took the template's path


async def test_a_sessions_terminal_records_are_the_plain_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Background and foreground children of two types in one session: every terminal write
    hands the store ``json_codec``'s bytes of its record, the background ones' from their
    template, and the files on disk hold those bytes."""
    handed: list[tuple[SidecarRecord, bytes, bool]] = []
    real_terminal = RunningTemplate.encode_terminal
    real_own = DurableRecords._own
    seen: set[int] = set()

    def spy_encode(self: RunningTemplate, record: SidecarRecord) -> bytes | None:
        data = real_terminal(self, record)
        if data is not None:
            seen.add(id(data))
        return data

    def spy_own(self: DurableRecords, write: Any) -> Any:
        if write.record.status != "running":
            handed.append((write.record, write.data, id(write.data) in seen))
        return real_own(self, write)

    monkeypatch.setattr(RunningTemplate, "encode_terminal", spy_encode)
    monkeypatch.setattr(DurableRecords, "_own", spy_own)
    launches = [
        {
            "name": "Agent",
            "input": {
                "description": f"child {i} \u00e9",
                "prompt": f'job {i} "q"',
                "subagent_type": kind,
                "run_in_background": i != 3,
            },
        }
        for i, kind in enumerate(["general-purpose", "Explore", "general-purpose", "Explore"])
    ]
    script = {
        "agents": [
            {"agent_type": "main", "turns": [{"tool_calls": launches}, *({"text": "ack"},) * 6]},
            {"agent_type": "general-purpose", "turns": [{"text": "done \u2603"}]},
            {"agent_type": "Explore", "turns": [{"text": "found"}]},
        ]
    }
    session = Session(
        SessionOptions(model=ScriptedModel.from_dict(script), cwd=tmp_path, home=tmp_path / "home")
    )
    await session.run("go")
    assert len(handed) == 4
    assert sum(templated for _, _, templated in handed) >= 3  # the background ones at least
    records = session.background.records
    assert records is not None and isinstance(records.store, FileStore)
    assert records._started_from == {} and records._latest == {}  # nothing kept past the end
    agents = records.store.state.agents_dir
    for record, data, _ in handed:
        assert record.status == "completed" and record.resumable is True
        assert data == plain_bytes(record)
        assert (agents / f"{record.agent_id}.json").read_bytes() == data
