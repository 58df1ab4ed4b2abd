"""The public API: exactly the names ``subagents`` exports, usable on their own, loaded lazily.

Pinned as httpx pins its own (tests/test_exported_members.py there): adding or removing a public
name is a decision, made here on purpose, not a side effect of a refactor.
"""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import subagents
from subagents import ScriptedModel, Session, SessionOptions, ToolContext, core_tools, tool

EXPORTED = [
    "AgentDefinition",
    "AgentRef",
    "AgentRun",
    "AssistantEvent",
    "CallInfo",
    "core_tools",
    "DefinitionSet",
    "Event",
    "FileStore",
    "FunctionTool",
    "InitEvent",
    "load_definitions",
    "MemoryStore",
    "Message",
    "Model",
    "ModelError",
    "NotificationEvent",
    "PermissionResult",
    "ProgressEvent",
    "ResultEvent",
    "RuntimeConfig",
    "ScriptedModel",
    "Session",
    "SessionOptions",
    "SessionResult",
    "Store",
    "SystemEvent",
    "tool",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolInput",
    "ToolOutput",
    "ToolResultsEvent",
    "Usage",
    "__version__",
]


def test_exactly_these_names_are_exported() -> None:
    assert sorted(subagents.__all__) == sorted(EXPORTED)
    assert len(set(subagents.__all__)) == len(subagents.__all__)


@pytest.mark.parametrize("name", [n for n in EXPORTED if n != "__version__"])
def test_each_name_resolves_to_its_implementation(name: str) -> None:
    value = getattr(subagents, name)
    assert name in dir(subagents)
    if inspect.isclass(value) or inspect.isfunction(value):  # not type aliases (Event)
        module = value.__module__
        assert module.startswith("subagents."), f"{name} is defined outside the package"
        assert value is vars(sys.modules[module])[name]


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        subagents.no_such_thing  # type: ignore[attr-defined]  # noqa: B018


def test_importing_the_package_imports_nothing_else() -> None:
    """No I/O and no optional dependency at import: every exported name loads on first use."""
    code = (
        "import sys, subagents; print(sorted(m for m in sys.modules if m.startswith('subagents')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['subagents']"


async def test_a_session_runs_on_the_public_names_alone(tmp_path: Path) -> None:
    @tool(read_only=True)
    async def where(ctx: ToolContext) -> str:
        """Say where the agent works."""
        return ctx.cwd.name

    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [{"name": "where", "input": {}}]},
                    {"text": "in {{tool_results}}"},
                ],
            }
        ]
    }
    options = SessionOptions(
        model=ScriptedModel.from_dict(script),
        cwd=tmp_path,
        home=tmp_path / "home",
        tools=[*core_tools(), where],
        load_settings=False,
    )
    events: list[subagents.Event] = []
    result = await Session(options).run("go", on_event=events.append)
    assert result.result == f"in {tmp_path.name}"
    assert isinstance(events[0], subagents.InitEvent) and isinstance(
        events[-1], subagents.ResultEvent
    )
    assert isinstance(result, subagents.SessionResult)
    assert all(isinstance(run, subagents.AgentRun) for run in result.agents)


def test_a_session_result_reprs_as_one_short_line(tmp_path: Path) -> None:
    """``asyncio.run`` on 3.11 reprs the value its coroutine returns (twice, for a SIGINT
    handler check): a result's repr must not be every agent's history."""
    script = {"agents": [{"agent_type": "main", "turns": [{"text": "x" * 100_000}]}]}
    options = SessionOptions(
        model=ScriptedModel.from_dict(script),
        cwd=tmp_path,
        home=tmp_path / "home",
        load_settings=False,
    )
    session = Session(options)
    result = asyncio.run(session.run("go " * 10_000))
    assert result.result == "x" * 100_000
    assert repr(result) == (
        f"<SessionResult 'success' session {result.session_id!r} agents=1 turns=1>"
    )
