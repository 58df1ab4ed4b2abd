"""The per-child run objects built field by field (``agent_run.new_run``, ``new_frame``,
``new_job``, ``query.new_stats``, ``new_loop_spec``, ``new_outcome``, ``events.new_ref``,
``tools.base.new_context``, ``models.base.new_request``, ``new_metadata``,
``spec.new_spec``, ``retry.new_caller``) are
what their classes' keyword calls build (``builders.check_builder``: random values, every
field, the class's order), and a session's children get runs of their own calls' values."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from builders import Given, check_builder
from cli_helpers import agent_call
from subagents.agents import agent_run
from subagents.agents.agent_run import AgentFrame, AgentJob, AgentRun, new_frame, new_job, new_run
from subagents.agents.spec import ChildSpec, new_spec
from subagents.events import AgentRef, new_ref
from subagents.loop.query import (
    LoopOutcome,
    LoopSpec,
    LoopStats,
    new_loop_spec,
    new_outcome,
    new_stats,
)
from subagents.models.base import ModelRequest, RequestMetadata, new_metadata, new_request
from subagents.models.retry import ModelCaller, new_caller
from subagents.session import Session, SessionOptions
from subagents.testing import ScriptedModel
from subagents.tools.base import ToolContext, new_context


def _given(name: str, trial: int) -> Any:
    """A ``Given`` per field, and for the fields ``__post_init__`` reads from, a value with
    distinct ``Given`` parts (a run's ref, a job's frame)."""
    if name == "ref":
        return SimpleNamespace(
            agent_id=Given("agent_id", trial), agent_type=Given("agent_type", trial)
        )
    if name == "frame":
        return SimpleNamespace(run=Given("run", trial))
    return Given(name, trial)


def test_new_run_builds_what_the_keyword_call_builds() -> None:
    check_builder(new_run, AgentRun, clocks={"started"}, values=_given)
    ref = AgentRef(agent_id="a", agent_type="t")
    for run in (AgentRun(ref=ref), _run(ref)):
        assert (run.agent_id, run.agent_type) == ("a", "t")  # the ref's, as plain attributes


def test_new_stats_builds_what_the_keyword_call_builds() -> None:
    check_builder(new_stats, LoopStats)


def test_new_frame_builds_what_the_keyword_call_builds() -> None:
    check_builder(new_frame, AgentFrame)


def test_new_job_builds_what_the_keyword_call_builds() -> None:
    check_builder(new_job, AgentJob, values=_given)


def _run(ref: AgentRef) -> AgentRun:
    return new_run(
        ref=ref,
        description="",
        prompt="",
        model="",
        depth=0,
        is_background=False,
        tool_use_id=None,
        root_agent_id=None,
        resumed_from=None,
        resume_depth=0,
    )


def test_new_loop_spec_builds_what_the_keyword_call_builds() -> None:
    check_builder(new_loop_spec, LoopSpec)


def test_new_outcome_builds_what_the_keyword_call_builds() -> None:
    check_builder(new_outcome, LoopOutcome)


def test_new_spec_builds_what_the_keyword_call_builds() -> None:
    check_builder(new_spec, ChildSpec)


def test_new_context_builds_what_the_keyword_call_builds() -> None:
    check_builder(new_context, ToolContext)


def test_a_loops_request_builds_what_the_keyword_calls_build() -> None:
    check_builder(new_request, ModelRequest)
    check_builder(new_metadata, RequestMetadata)


def test_new_caller_builds_what_the_keyword_call_builds() -> None:
    check_builder(new_caller, ModelCaller)


def test_new_ref_builds_what_the_keyword_call_builds() -> None:
    check_builder(new_ref, AgentRef)
    ref = new_ref(agent_id="a", agent_type="t", parent_agent_id=None)
    assert ref == AgentRef(agent_id="a", agent_type="t") and hash(ref) == hash(
        AgentRef(agent_id="a", agent_type="t")
    )
    with pytest.raises(AttributeError):
        ref.agent_id = "b"  # type: ignore[misc]  # still frozen


@pytest.mark.parametrize("mode", [None, "acceptEdits", "plan"])
async def test_a_sessions_children_get_runs_of_their_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str | None
) -> None:
    specs: list[LoopSpec] = []
    real = agent_run.run_loop

    async def capture(spec: LoopSpec) -> LoopOutcome:
        specs.append(spec)
        return await real(spec)

    monkeypatch.setattr(agent_run, "run_loop", capture)
    launches = [
        # (asks for plan mode: its checker's mode, not the mode its definition would show)
        agent_call("fg job", "Explore", description="fg", mode="plan"),
        agent_call("bg job", "general-purpose", description="bg", run_in_background=True),
    ]
    script: dict[str, Any] = {
        "agents": [
            {"agent_type": "main", "turns": [{"tool_calls": launches}, *[{"text": "ok"}] * 3]},
            {"agent_type": "Explore", "turns": [{"text": "explored"}]},
            {"agent_type": "general-purpose", "turns": [{"text": "done"}]},
        ]
    }
    session = Session(
        SessionOptions(
            model=ScriptedModel.from_dict(script),
            cwd=tmp_path,
            home=tmp_path / "h",
            permission_mode=mode,
            disallowed_tools=["Bash(rm *)"],
        )
    )
    await session.run("go")
    runs = {}
    for spec in specs:
        assert isinstance(spec.ctx.owner, AgentFrame)
        frame = spec.ctx.owner
        run = frame.run
        assert spec.stats is run.stats
        assert (run.agent_id, run.agent_type) == (run.ref.agent_id, run.ref.agent_type)
        # A frame's mode is its checker's (the mode its rules are checked in).
        assert frame.permissions is not None and spec.ctx.can_use_tool is not None
        assert frame.permission_mode == frame.permissions.context.mode
        # A child holding the Agent tool has catalog reminders (the loop's, from its spec).
        holds_agent = "Agent" in frame.tool_names()
        assert (spec.reminders is not None) == (spec.restate is not None) == holds_agent
        assert spec.on_turn is not None or not run.depth
        if run.depth:
            assert frame.mode_ceiling == (mode or "default")
            if run.description == "fg":
                assert frame.permission_mode == "plan"
            assert frame.permissions is not specs[0].ctx.owner.permissions  # type: ignore[union-attr]
        runs[run.description or "main"] = run
    main = runs["main"]
    for name, background, answer in (("fg", False, "explored"), ("bg", True, "done")):
        run = runs[name]
        assert (run.prompt, run.depth, run.is_background) == (f"{name} job", 1, background)
        assert run.ref.parent_agent_id == main.agent_id and run.model == "scripted"
        assert run.tool_use_id is not None and run.tool_use_id.startswith("toolu_")
        assert (run.root_agent_id, run.resumed_from, run.resume_depth) == (None, None, 0)
        assert (run.status, run.result_text, run.stats.num_turns) == ("completed", answer, 1)
        assert run.worktree_fields == {} and run.worktree_outcome is None
        assert run.stats is not main.stats and run.messages is not main.messages
        assert run.worktree_fields is not main.worktree_fields


async def test_a_fresh_childs_spec_has_its_definitions_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``definition_spec`` sets the fields it does not pass to ``new_spec`` (reminders, the
    requested mode, frontmatter hooks, memory): each reaches the spec, and the loop."""
    from subagents.agents import agent_tool
    from subagents.agents.definitions import load_definitions

    seen: list[ChildSpec] = []
    real_assemble = agent_tool.assemble

    def capture_spec(*args: Any) -> Any:
        seen.append(args[-1])
        return real_assemble(*args)

    specs: list[LoopSpec] = []
    real = agent_run.run_loop

    async def capture(spec: LoopSpec) -> LoopOutcome:
        specs.append(spec)
        return await real(spec)

    monkeypatch.setattr(agent_tool, "assemble", capture_spec)
    monkeypatch.setattr(agent_run, "run_loop", capture)
    hooks = {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}
    agents = {
        "delegator": {
            "description": "delegates",
            "prompt": "You delegate.",
            "tools": ["Agent", "Read"],
            "hooks": hooks,
        }
    }
    definitions = load_definitions(
        cwd=tmp_path,
        home=tmp_path / "h",
        subagents_home=tmp_path / "s",
        cli_agents=__import__("json").dumps(agents),
    )
    script: dict[str, Any] = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("go", "delegator", mode="plan")]},
                    {"text": "ok"},
                ],
            },
            {"agent_type": "delegator", "turns": [{"text": "done"}]},
        ]
    }
    session = Session(
        SessionOptions(
            model=ScriptedModel.from_dict(script),
            cwd=tmp_path,
            home=tmp_path / "h",
            definitions=definitions,
        )
    )
    await session.run("go")
    (child,) = seen
    assert child.kind == "fresh" and child.agent_type == "delegator"
    assert child.reminders is not None and child.restate is not None
    assert child.requested_mode == "plan" and child.agent_id is None
    assert child.definition is not None and child.frontmatter_hooks is child.definition.hooks
    assert child.frontmatter_hooks is not None and child.memory is None
    assert child.memory_only == frozenset() and child.lineage is None and child.task_text == ""
    loop = specs[-1]
    assert loop.reminders is child.reminders and loop.restate is child.restate
    assert loop.prompt == "go" and loop.team_name is None


@pytest.mark.parametrize("limit", [1, 2])
async def test_a_childs_depth_is_its_parents_plus_one_and_limited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    """Each nested child's run is one deeper than its parent's, and a parent at the limit
    cannot spawn (``agent_tool._check_limits`` and ``assembly._run`` read the run's depth)."""
    from subagents.agents.definitions import load_definitions
    from subagents.config import RuntimeConfig

    specs: list[LoopSpec] = []
    real = agent_run.run_loop

    async def capture(spec: LoopSpec) -> LoopOutcome:
        specs.append(spec)
        return await real(spec)

    monkeypatch.setattr(agent_run, "run_loop", capture)
    nester = {"nester": {"description": "nests", "prompt": "You nest.", "tools": ["Agent"]}}
    definitions = load_definitions(
        cwd=tmp_path,
        home=tmp_path / "h",
        subagents_home=tmp_path / "s",
        cli_agents=__import__("json").dumps(nester),
    )
    turns = [{"tool_calls": [agent_call("deeper", "nester")]}, {"text": "{{tool_results}}"}]
    script: dict[str, Any] = {
        "agents": [
            {"agent_type": "main", "turns": turns},
            {"agent_type": "nester", "turns": turns},
        ]
    }
    session = Session(
        SessionOptions(
            model=ScriptedModel.from_dict(script),
            cwd=tmp_path,
            home=tmp_path / "h",
            definitions=definitions,
            config=RuntimeConfig(max_spawn_depth=limit),
        )
    )
    result = await session.run("go")
    depths = []
    for spec in specs:
        assert isinstance(spec.ctx.owner, AgentFrame)
        depths.append(spec.ctx.owner.run.depth)
    assert depths == list(range(limit + 1))
    assert "depth limit" in str(result.payload.get("result"))
