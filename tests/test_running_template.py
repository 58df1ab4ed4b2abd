"""A fresh child's running record from one template per type (``RunningTemplate``): the record
and its bytes are exactly what the plain build makes — ``durability.build_record`` and
``json_codec``'s bytes of ``to_dict()`` — for every agent type, placement and field value."""

from __future__ import annotations

import itertools
import types
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from subagents import ScriptedModel, Session, SessionOptions, json_codec
from subagents.agents import durability
from subagents.agents.agent_run import AgentJob
from subagents.agents.tasks import TaskState
from subagents.frozen import new_frozen
from subagents.state import ProjectState
from subagents.store import FileStore
from subagents.store.capabilities import encode_record
from subagents.store.durable import DurableRecords
from subagents.store.process_identity import ProcessIdentity
from subagents.store.record_encoding import OWN_FIELDS, RunningTemplate
from subagents.store.records import (
    NO_RESULT,
    NO_STATS,
    SCHEMA_VERSION,
    ConfigSnapshot,
    Lineage,
    SidecarRecord,
)
from subagents.store.writer import DurableWriter


def plain_bytes(record: SidecarRecord) -> bytes:
    return json_codec.dumps(record.to_dict()) + b"\n"


def shared_values(**overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "agent_type": "worker",
        "session_id": "session-1",
        "project_path": "/p/project",
        "parent_agent_id": "session-1",
        "is_background": True,
        "config": ConfigSnapshot(model="m", tools=("Read", "Note"), system_prompt="sys"),
        "process": ProcessIdentity(pid=4242, start_identity="boot:1 start:2", hostname="host"),
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
    values.update(overrides)
    return values


SHARED = {
    "a background worker": shared_values(),
    "a foreground child of a child": shared_values(
        agent_type="Explore", parent_agent_id="a00000007", is_background=False
    ),
    "no parent, no process": shared_values(parent_agent_id=None, process=None),
    "a full config, non-ASCII type": shared_values(
        agent_type="r\u00e9viseur",
        config=ConfigSnapshot(
            model="claude",
            permission_mode="plan",
            tools=None,
            system_prompt='multi\nline "quoted" \u00e9 \U0001f600 \\ </tag>',
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
}

OWN: list[dict[str, Any]] = [
    {
        "agent_id": "a00000001",
        "description": "swarm 1",
        "prompt": "swarm job 1",
        "tool_use_id": "toolu_1",
        "lineage": Lineage(root_agent_id="a00000001"),
        "created_at": 1764770000.123456,
        "last_active_at": 1764770000.123456,
        "output_path": "/tmp/tasks/a00000001.output",
        "transcript_path": "/s/agents/a00000001.jsonl",
    },
    {
        "agent_id": "a00000002",
        "description": 'caf\u00e9 "quoted" \\ \u2603',
        "prompt": "\u4f60\u597d\n\tline two </result>",
        "tool_use_id": None,
        "lineage": Lineage(root_agent_id="a00000000", resumed_from="a00000001", resume_depth=2),
        "created_at": 1e16,
        "last_active_at": 0.1,
        "output_path": None,
        "transcript_path": None,
    },
]


def filled(template: RunningTemplate, own: dict[str, Any]) -> dict[str, Any]:
    values = template.values.copy()
    values.update(own)
    return values


@pytest.mark.parametrize("shape", sorted(SHARED))
def test_a_template_built_record_is_the_plain_one_byte_for_byte(shape: str) -> None:
    template = RunningTemplate(SHARED[shape])
    for own in OWN:
        values = filled(template, own)
        record = new_frozen(SidecarRecord, values)
        plain = SidecarRecord(**SHARED[shape], **own)
        assert record == plain and repr(record) == repr(plain)
        assert list(vars(record)) == list(vars(plain))  # the same fields, in field order
        assert template.encode(values) == plain_bytes(plain) == encode_record(plain)
    # The template is never changed by what is built from it.
    assert all(template.values[name] is None for name in OWN_FIELDS)


def test_what_orjson_refuses_takes_the_plain_path() -> None:
    """A lone surrogate in the child's own text: no bytes from the template (the record's own
    ``encode_record`` falls back to ``json_codec``); in a shared part: no template at all."""
    template = RunningTemplate(shared_values())
    values = filled(template, {**OWN[0], "prompt": "bad \ud800 char"})
    assert template.encode(values) is None
    record = new_frozen(SidecarRecord, values)
    assert encode_record(record) == plain_bytes(record)
    refused = ConfigSnapshot(model="m", system_prompt="sys \udcff")
    with pytest.raises(TypeError):
        RunningTemplate(shared_values(config=refused))
    with pytest.raises(ValueError):
        RunningTemplate({**shared_values(), "agent_id": "a00000001"})


GP = {"subagent_type": "general-purpose"}


def _launch(index: int, agent_type: str, background: bool) -> dict[str, Any]:
    return {
        "name": "Agent",
        "input": {
            "description": f"child {index} \u00e9",
            "prompt": f'job {index} "quoted"\n',
            "subagent_type": agent_type,
            "run_in_background": background,
        },
    }


async def test_a_sessions_children_start_with_the_plain_record_and_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Children of three types, background and foreground, in one session: each start record
    and the bytes handed to the store are ``build_record``'s record and ``json_codec``'s bytes
    of it (the clock pinned so both builds read the same time); siblings share one template;
    the records on disk read back as written."""
    monkeypatch.setattr(durability, "time", types.SimpleNamespace(time=lambda: 1764770000.5))
    written: list[tuple[SidecarRecord, bytes | None]] = []
    plain: list[SidecarRecord] = []
    real_started = DurableRecords.started
    real_build = durability.started

    def spy_started(self: DurableRecords, record: SidecarRecord, data: bytes | None = None) -> Any:
        written.append((record, data))
        return real_started(self, record, data)

    def spy_build(records: DurableRecords, job: AgentJob, state: TaskState) -> None:
        real_build(records, job, state)
        config = records.config_from(
            durability._snapshot_parts(job), lambda: durability.config_snapshot(job)
        )
        plain.append(
            durability.build_record(
                job,
                state,
                session_id=records.session_id,
                project_path=records.project_path,
                identity=records.identity,
                config=config,
            )
        )

    monkeypatch.setattr(DurableRecords, "started", spy_started)
    monkeypatch.setattr(durability, "started", spy_build)
    kinds = ["general-purpose", "Explore", "general-purpose", "Plan"]
    calls = [_launch(i, kind, i % 2 == 0) for i, kind in enumerate(kinds)]
    first = {"name": "Agent", "input": {"description": "first", "prompt": "first", **GP}}
    resumed = {"name": "Agent", "input": {"description": "again", "prompt": "again"}}
    resumed["input"]["resume_from"] = "{{capture.first}}"
    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [first]},
                    {"capture": {"first": r"agentId: (\w+)"}, "tool_calls": [resumed, *calls]},
                    *({"text": "ack"},) * 6,
                ],
            },
            *({"agent_type": kind, "turns": [{"text": "done"}]} for kind in set(kinds)),
        ]
    }
    session = Session(
        SessionOptions(model=ScriptedModel.from_dict(script), cwd=tmp_path, home=tmp_path / "home")
    )
    await session.run("go")
    assert len(written) == len(plain) == len(kinds) + 2
    resumed_from = [record.lineage.resumed_from for record, _ in written]
    assert resumed_from.count(written[0][0].agent_id) == 1  # a resumed child among them
    for (record, data), expected in zip(written, plain, strict=True):
        assert data is not None, "took the template path"
        assert record == expected and repr(record) == repr(expected)
        assert data == plain_bytes(expected)
    records = session.background.records
    assert records is not None and isinstance(records.store, FileStore)
    disk = FileStore(records.store.state)
    for record, _ in written:
        stored = disk.get(record.agent_id)
        assert stored is not None and stored.agent_id == record.agent_id
        assert replace(stored, status="running", ended_at=None).created_at == record.created_at
    templates = list(records._templates.values())
    assert len(templates) == len({(r.agent_type, r.is_background) for r, _ in written})
    for a, b in itertools.combinations([r for r, _ in written], 2):
        assert vars(a) is not vars(b)


def test_a_placement_that_is_not_a_bool_gets_no_template(tmp_path: Path) -> None:
    """``1 == True`` and both hash alike, so a template keyed by ``True`` would hand a record
    placed ``1`` its ``true``; such a placement takes the plain path instead."""
    records = DurableRecords(
        store=FileStore(ProjectState.for_cwd(tmp_path, home=tmp_path / "home")),
        writer=DurableWriter(),
        session_id="session-1",
        project_path=str(tmp_path),
    )
    config = ConfigSnapshot(model="m")
    template = records.running_template("worker", "session-1", True, config)
    assert template is not None
    assert records.running_template("worker", "session-1", True, config) is template
    assert records.running_template("worker", "session-1", 1, config) is None  # type: ignore[arg-type]
    assert records.running_template("worker", "session-1", False, config) is not template
