"""Background sub-agents and shells through the real CLI and the library (issue 4)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import agent_call, recorded, run_script, tool_call, wait_until_dead, write_script
from subagents.events import Event, NotificationEvent
from subagents.session import Session, SessionOptions
from subagents.testing import ScriptedModel


def bg_call(prompt: str, subagent_type: str = "Explore", **extra: Any) -> dict[str, Any]:
    return agent_call(prompt, subagent_type, description="bg job", run_in_background=True, **extra)


def test_async_launch_returns_first_and_the_late_notification_is_delivered(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [bg_call("token Q7")]},
                    {"text": "launched: {{tool_results}}"},
                    {"text": "heard back: {{last_user}}"},
                ],
            },
            {
                "agent_type": "Explore",
                "turns": [
                    {"tool_calls": [tool_call("Glob", pattern="*")], "delay_ms": 300},
                    {"text": "report for {{prompt}}"},
                ],
            },
        ],
    )
    run = run_script(script, tmp_path, output_format="stream-json")
    assert run.code == 0, run.stderr
    events = run.events()
    result = events[-1]
    assert result["subtype"] == "success"
    assert "<task-notification>" in result["result"]
    assert "report for token Q7" in result["result"]
    assert result["agents"][1]["status"] == "completed"
    notes = [e for e in events if e["type"] == "task_notification"]
    assert len(notes) == 1 and notes[0]["status"] == "completed"
    # The coordinator's second request (after async_launched) came before the child finished.
    order = [r["agent_type"] for r in recorded(tmp_path)]
    assert order.index("main", 1) < len(order) - 1 - order[::-1].index("Explore")
    tool_result = next(e for e in events if e["type"] == "user" and e["agent_type"] == "main")
    assert "Async agent launched successfully" in tool_result["message"]["content"][0]["content"]


def test_long_report_is_capped_in_the_notification_and_saved_whole(tmp_path: Path) -> None:
    big = "X" * 200_000
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [bg_call("big")]},
                    {"text": "waiting"},
                    {"text": "{{last_user}}"},
                ],
            },
            {"agent_type": "Explore", "turns": [{"text": big}]},
        ],
    )
    run = run_script(script, tmp_path)
    assert run.code == 0, run.stderr
    text = run.json()["result"]
    inlined = re.search(r"\n(X+)\n\[\.\.\. truncated: (\d+) more characters", text)
    assert inlined is not None
    assert len(inlined.group(1)) == 32_000
    assert int(inlined.group(2)) == 168_000
    output_file = re.search(r"<output-file>(.+)</output-file>", text)
    assert output_file is not None
    assert big in Path(output_file.group(1)).read_text()


def test_task_stop_kills_the_child_and_its_shell(tmp_path: Path) -> None:
    pidfile = tmp_path / "bg.pid"
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [bg_call("work", subagent_type="general-purpose")]},
                    {
                        "capture": {"id": r"agentId: (\w+)"},
                        "tool_calls": [
                            tool_call(
                                "Bash", command=f"while [ ! -s {pidfile} ]; do sleep 0.05; done"
                            )
                        ],
                    },
                    {"tool_calls": [tool_call("TaskStop", task_id="{{capture.id}}")]},
                    {"text": "stopped: {{tool_results}}"},
                    {"text": "then: {{last_user}}"},
                ],
            },
            {
                "agent_type": "general-purpose",
                "turns": [
                    {
                        "tool_calls": [
                            tool_call("Bash", command=f"sleep 300 & echo $! > {pidfile}; wait")
                        ]
                    },
                    {"text": "never"},
                ],
            },
        ],
    )
    run = run_script(script, tmp_path, "--permission-mode", "bypassPermissions")
    assert run.code == 0, run.stderr
    result = run.json()
    assert "stopped" in result["result"]
    child = result["agents"][1]
    assert child["status"] == "killed"
    pid = int(pidfile.read_text())
    assert wait_until_dead(pid)


def test_auto_background_after_a_short_timeout(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("slow", "Explore", description="slow sync")]},
                    {"text": "parent went on: {{tool_results}}"},
                    {"text": "later: {{last_user}}"},
                ],
            },
            {"agent_type": "Explore", "turns": [{"text": "slow child done", "delay_ms": 800}]},
        ],
    )
    run = run_script(
        script, tmp_path, output_format="stream-json", env={"SUBAGENTS_AUTO_BACKGROUND_MS": "200"}
    )
    assert run.code == 0, run.stderr
    events = run.events()
    first_answer = next(
        e
        for e in events
        if e["type"] == "assistant"
        and e["agent_type"] == "main"
        and e["message"]["content"][0]["type"] == "text"
    )
    assert "auto-background" in first_answer["message"]["content"][0]["text"]
    assert "slow child done" in events[-1]["result"]


def test_stalled_background_child_fails_with_partial_result(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [bg_call("stall")]},
                    {"text": "ok"},
                    {"text": "{{last_user}}"},
                ],
            },
            {
                "agent_type": "Explore",
                "turns": [
                    {"text": "partial words", "tool_calls": [tool_call("Glob", pattern="*")]},
                    {"text": "never", "delay_ms": 5000},
                ],
            },
        ],
    )
    run = run_script(script, tmp_path, env={"SUBAGENTS_ASYNC_AGENT_STALL_TIMEOUT_MS": "300"})
    assert run.code == 0, run.stderr
    result = run.json()
    assert result["agents"][1]["status"] == "failed"
    assert "<status>failed</status>" in result["result"]
    assert "stalled" in result["result"]


def test_background_shell_notifies_and_task_output_reads_it(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            tool_call(
                                "Bash",
                                command="echo shell-says-hi; sleep 0.2",
                                run_in_background=True,
                            )
                        ]
                    },
                    {
                        "capture": {"id": r"ID: (\w+)"},
                        "tool_calls": [tool_call("TaskOutput", task_id="{{capture.id}}")],
                    },
                    {"text": "output: {{tool_results}}"},
                    {"text": "note: {{last_user}}"},
                ],
            },
        ],
    )
    run = run_script(script, tmp_path, "--permission-mode", "bypassPermissions")
    assert run.code == 0, run.stderr
    text = run.json()["result"]
    assert "shell-says-hi" in text


def test_disabled_background_runs_in_the_foreground_and_hides_the_field(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("p", "Explore", description="fg")]},
                    {"text": "{{tool_results}}"},
                ],
            },
            {"agent_type": "Explore", "turns": [{"text": "ran in foreground"}]},
        ],
    )
    run = run_script(script, tmp_path, env={"CLAUDE_CODE_DISABLE_BACKGROUND_TASKS": "1"})
    assert run.code == 0, run.stderr
    assert "ran in foreground" in run.json()["result"]
    main = recorded(tmp_path)[0]
    agent_schema = next(t for t in main["tools"] if t["name"] == "Agent")["input_schema"]
    assert "run_in_background" not in agent_schema["properties"]


async def test_exactly_one_notification_per_child_when_completion_races_shutdown(
    tmp_path: Path,
) -> None:
    children = 12
    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [bg_call(f"child {i}") for i in range(children)]},
                    # Notifications that are already pending are still read after an answer, so
                    # the coordinator may take a few more turns; the rest race with shutdown.
                    *[{"text": "ack", "delay_ms": 15} for _ in range(children + 1)],
                ],
            },
            {
                "agent_type": "Explore",
                "match": r"child (\d+)",
                "turns": [
                    {"text": "finished {{match.1}}", "delay_ms": 0},
                ],
            },
        ]
    }
    for round_ in range(3):
        for entry in script["agents"][1]["turns"]:
            entry["delay_ms"] = 20 + 10 * round_
        events: list[Event] = []
        session = Session(
            SessionOptions(
                model=ScriptedModel.from_dict(script),
                cwd=tmp_path,
                background_wait_ms=0,
            )
        )
        result = await session.run("go", on_event=events.append)
        assert result.subtype == "success"
        notes = [e for e in events if isinstance(e, NotificationEvent)]
        ids = [n.task_id for n in notes]
        assert len(ids) == children and len(set(ids)) == children
        assert all(t.terminal for t in session.registry.list())
        delivered = [
            b["text"]
            for m in session.agents[0].messages
            if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"]
            if b["type"] == "text" and b["text"].startswith("<task-notification>")
        ]
        assert len(delivered) == len(set(delivered)), "no notification delivered twice"
        await asyncio.sleep(0)


async def test_one_sweep_watches_every_background_child(tmp_path: Path) -> None:
    """The supervisor's single sweep timer: among children launched together, the one that
    goes quiet is failed as stalled, the one that keeps making progress (longer than the stall
    timeout in total) completes with progress lines in its output file, and no timer is left
    once nothing is watched."""
    from subagents.config import RuntimeConfig

    walking = [{"tool_calls": [tool_call("Glob", pattern="*")], "delay_ms": 100} for _ in range(9)]
    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [bg_call("walk"), bg_call("hang", "general-purpose")]},
                    {"text": "launched"},
                    {"text": "one"},
                    {"text": "two"},
                ],
            },
            {"agent_type": "Explore", "turns": [*walking, {"text": "walked"}]},
            {"agent_type": "general-purpose", "turns": [{"text": "never", "delay_ms": 10_000}]},
        ]
    }
    session = Session(
        SessionOptions(
            model=ScriptedModel.from_dict(script),
            cwd=tmp_path,
            home=tmp_path / "home",
            config=RuntimeConfig(stall_timeout_ms=600),
        )
    )
    result = await session.run("go")
    runs = {run.agent_type: run for run in result.agents[1:]}
    assert runs["Explore"].status == "completed", runs["Explore"].error
    assert runs["general-purpose"].status == "failed"
    assert "stalled" in (runs["general-purpose"].error or "")
    walker = session.registry.get(runs["Explore"].agent_id)
    assert walker is not None and walker.output_path is not None
    assert "[progress] turns=" in walker.output_path.read_text()
    supervisor = session.background.supervisor
    assert supervisor.watched == 0 and supervisor._sweep is None


async def test_children_of_one_type_share_one_config_snapshot(tmp_path: Path) -> None:
    """Three Explore children and a general-purpose one: each record on disk holds its own
    type's config, and the session keeps one snapshot object per distinct config
    (``DurableRecords.shared_config``: frozen, held by every waiting child's record)."""
    from dataclasses import replace

    from subagents.store import FileStore

    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            *(bg_call(f"look {i}") for i in range(3)),
                            bg_call("work", "general-purpose"),
                        ]
                    },
                    *({"text": "ok"} for _ in range(5)),
                ],
            },
            {"agent_type": "Explore", "turns": [{"text": "seen"}]},
            {"agent_type": "general-purpose", "turns": [{"text": "done"}]},
        ]
    }
    options = SessionOptions(
        model=ScriptedModel.from_dict(script), cwd=tmp_path, home=tmp_path / "home"
    )
    session = Session(options)
    result = await session.run("go")
    records = session.background.records
    assert records is not None
    assert isinstance(records.store, FileStore)
    disk = FileStore(records.store.state)  # a fresh store: the records as read from disk
    stored = [disk.get(run.agent_id) for run in result.agents[1:]]
    configs: dict[str, list[Any]] = {r.agent_type: [] for r in stored if r is not None}
    for record in stored:
        assert record is not None and record.status == "completed"
        configs[record.agent_type].append(record.config)
    assert len(configs["Explore"]) == 3 and len(set(configs["Explore"])) == 1
    assert configs["Explore"][0] != configs["general-purpose"][0]
    explore = configs["Explore"][0]
    again = replace(explore)  # equal, another object
    assert again is not explore and records.shared_config(again) is records.shared_config(explore)
    thinking = replace(explore, thinking={"type": "enabled"})  # unhashable: passed through
    assert records.shared_config(thinking) is thinking


async def test_children_of_one_type_build_their_config_snapshot_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four Explore children and a general-purpose one: the snapshot is built once per type
    (``DurableRecords.config_from``), each record on disk still holds its own type's config,
    and the snapshot's JSON form, made once, comes back as a new dict at every call."""
    from dataclasses import replace

    from subagents.agents import durability
    from subagents.store import FileStore

    built: list[str] = []
    real = durability.config_snapshot

    def counting(job: Any) -> Any:
        built.append(job.run.agent_type)
        return real(job)

    monkeypatch.setattr(durability, "config_snapshot", counting)
    calls = [*(bg_call(f"look {i}") for i in range(4)), bg_call("work", "general-purpose")]
    script = {
        "agents": [
            {"agent_type": "main", "turns": [{"tool_calls": calls}, *({"text": "ok"},) * 6]},
            {"agent_type": "Explore", "turns": [{"text": "seen"}]},
            {"agent_type": "general-purpose", "turns": [{"text": "done"}]},
        ]
    }
    options = SessionOptions(
        model=ScriptedModel.from_dict(script), cwd=tmp_path, home=tmp_path / "home"
    )
    session = Session(options)
    result = await session.run("go")
    assert sorted(built) == ["Explore", "general-purpose"]
    records = session.background.records
    assert records is not None and isinstance(records.store, FileStore)
    disk = FileStore(records.store.state)
    stored = {run.agent_id: disk.get(run.agent_id) for run in result.agents[1:]}
    tools: dict[str, set[Any]] = {"Explore": set(), "general-purpose": set()}
    for record in stored.values():
        assert record is not None and record.status == "completed"
        tools[record.agent_type].add(record.config.tools)
    assert len(tools["Explore"]) == len(tools["general-purpose"]) == 1
    assert tools["Explore"] != tools["general-purpose"]  # each type's own tools
    config = next(r.config for r in stored.values() if r is not None)
    first, second = config.to_dict(), config.to_dict()
    assert first == second and first is not second
    first["model"] = "changed"
    assert config.to_dict()["model"] == config.model
    assert replace(config, model="other").to_dict()["model"] == "other"  # no stale JSON form


async def test_a_childs_records_are_the_values_their_init_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lineage, result and stats a background child's writes are built
    from (``durability._frozen``, every field given in field order) are the values each
    class's own ``__init__`` makes, and the records on disk read back as the runtime's own."""
    import dataclasses

    from subagents.agents import durability
    from subagents.store import FileStore
    from subagents.store.records import Lineage

    made: list[tuple[type, object, bool]] = []
    real = durability._frozen

    def checked(cls: type, values: dict[str, Any]) -> Any:
        every_field = list(values) == [f.name for f in dataclasses.fields(cls)]
        expected = cls(**values)
        value = real(cls, values)
        assert value == expected and repr(value) == repr(expected), cls
        assert vars(value) == vars(expected) and type(value) is cls
        made.append((cls, value, every_field))
        return value

    monkeypatch.setattr(durability, "_frozen", checked)
    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            bg_call("a", "general-purpose"),
                            bg_call("b", "general-purpose"),
                        ]
                    },
                    *({"text": "ok"},) * 4,
                ],
            },
            {"agent_type": "general-purpose", "turns": [{"text": "done"}]},
        ]
    }
    options = SessionOptions(
        model=ScriptedModel.from_dict(script), cwd=tmp_path, home=tmp_path / "home"
    )
    session = Session(options)
    result = await session.run("go")
    kinds = sorted(cls.__name__ for cls, _, _ in made)
    # (The running record itself comes from its type's template: tests/test_running_template.)
    assert kinds == sorted(["Lineage", "RunResult", "RunStats", "TokenUsage"] * 2)
    assert all(every for _, _, every in made)  # every field, in field order
    records = session.background.records
    assert records is not None and isinstance(records.store, FileStore)
    disk = FileStore(records.store.state)
    for run in result.agents[1:]:
        stored = disk.get(run.agent_id)
        assert stored is not None and stored.status == "completed" and stored.resumable
        assert stored.stats.num_turns == run.stats.num_turns == 1
        lineage = next(v for c, v, _ in made if c is Lineage and v.root_agent_id == run.agent_id)
        assert stored.lineage == lineage


async def test_children_of_one_type_share_one_derived_permission_context(tmp_path: Path) -> None:
    """Three workers and a reader: each child's permission context is its own type's (tools
    capped by the definition, the reader's mode), the three workers hold one object (``child_permissions``),
    each still has a checker of its own (plan mode replaces one child's context alone), and
    a parent whose context changed gets a fresh derivation for its next children."""
    from pydantic import BaseModel

    from subagents.agents.agent_run import AgentFrame
    from subagents.agents.agent_tool import AgentTool
    from subagents.agents.definitions import load_definitions
    from subagents.tools.base import CallInfo, Tool, ToolContext, ToolOutput

    seen: list[Any] = []

    class LookInput(BaseModel):
        text: str = ""

    class LookTool(Tool[LookInput]):
        name = "Look"
        description = "Record who calls."
        input_model = LookInput

        def is_read_only(self, args: LookInput) -> bool:
            return True

        async def call(self, args: LookInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
            assert isinstance(ctx.owner, AgentFrame)
            seen.append((ctx.agent.agent_type, ctx.owner.permissions))
            return ToolOutput(content="ok")

    agents = {
        "worker": {"description": "w", "prompt": "You work.", "tools": ["Look"]},
        "reader": {
            "description": "r",
            "prompt": "You read.",
            "tools": ["Look"],
            "permissionMode": "plan",
        },
    }
    import json

    definitions = load_definitions(
        cwd=tmp_path, home=tmp_path, subagents_home=tmp_path / "home", cli_agents=json.dumps(agents)
    )
    look = {"tool_calls": [{"name": "Look", "input": {"text": "x"}}]}
    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            *(bg_call(f"job {i}", "worker") for i in range(3)),
                            bg_call("read", "reader"),
                        ]
                    },
                    *({"text": "ok"} for _ in range(6)),
                ],
            },
            {"agent_type": "worker", "turns": [look, {"text": "done"}]},
            {"agent_type": "reader", "turns": [look, {"text": "done"}]},
        ]
    }
    session = Session(
        SessionOptions(
            model=ScriptedModel.from_dict(script),
            cwd=tmp_path,
            home=tmp_path / "home",
            tools=[AgentTool(), LookTool()],
            definitions=definitions,
        )
    )
    await session.run("go")
    workers = [checker for agent_type, checker in seen if agent_type == "worker"]
    readers = [checker for agent_type, checker in seen if agent_type == "reader"]
    assert len(workers) == 3 and len(readers) == 1
    assert len({id(c) for c in workers}) == 3  # a checker each
    assert len({id(c.context) for c in workers}) == 1  # one derived context
    assert workers[0].context.tools == frozenset({"Look"})
    assert readers[0].context is not workers[0].context  # its own type's derivation
    assert (readers[0].context.mode, workers[0].context.mode) == ("plan", "default")
    runtime = session.runtime
    parent = runtime.permissions
    assert parent is not None
    definition = runtime.definitions.find("worker")
    tools = list(runtime._child_contexts.values())[0].tools
    derived: list[int] = []

    def derive() -> Any:
        derived.append(1)
        return workers[0].context

    shared = runtime.child_permissions(parent.context, definition, None, tools, derive)
    assert shared is workers[0].context and not derived  # the entry the workers used
    from dataclasses import replace

    changed = replace(parent.context, mode="plan")  # the parent's context changed
    runtime.child_permissions(changed, definition, None, tools, derive)
    assert derived == [1]


async def test_a_running_childs_activity_reaches_its_record_at_most_once_per_interval(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """``lastActiveAt`` is rewritten while a child runs, throttled to ``ACTIVITY_INTERVAL_S``:
    with a short interval a child whose turns span it has a later ``lastActiveAt`` than its
    start; with the default (10 s) its quick turns write nothing between start and end."""
    from subagents.store import FileStore, durable

    slow = {"tool_calls": [{"name": "Read", "input": {"file_path": str(tmp_path / "x")}}]}
    turns = [{**slow, "delay_ms": 40}, {**slow, "delay_ms": 40}, {"text": "done", "delay_ms": 40}]

    async def run_once(interval: float) -> tuple[float, float]:
        monkeypatch.setattr(durable, "ACTIVITY_INTERVAL_S", interval)
        script = {
            "agents": [
                {
                    "agent_type": "main",
                    "turns": [{"tool_calls": [bg_call("go", "general-purpose")]}, {"text": "ok"}],
                },
                {"agent_type": "general-purpose", "turns": turns},
            ]
        }
        session = Session(
            SessionOptions(
                model=ScriptedModel.from_dict(script), cwd=tmp_path, home=tmp_path / "home"
            )
        )
        result = await session.run("go")
        records = session.background.records
        assert records is not None and isinstance(records.store, FileStore)
        record = FileStore(records.store.state).get(result.agents[1].agent_id)
        assert record is not None and record.status == "completed"
        assert record.ended_at is not None
        return record.last_active_at - record.created_at, record.ended_at - record.created_at

    active, ended = await run_once(0.03)
    assert 0.03 <= active <= ended
    active, _ = await run_once(10.0)
    assert active == 0.0
