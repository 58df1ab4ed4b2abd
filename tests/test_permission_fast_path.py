"""The allow-at-once permission path (``InstantPermission``) must never skip what the awaited
check does: deny and ask rules, PreToolUse hooks, a tool's own check, the denial breaker, a tool
the agent does not hold. Each case goes through the loop's scheduling as a session runs it; the
last test shows the path is taken at all (so the others are not passing by never reaching it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from step_tool import StepInput, StepTool
from subagents import (
    ScriptedModel,
    Session,
    SessionOptions,
    SessionResult,
    Tool,
    ToolContext,
    core_tools,
)
from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.hooks.config import HookCommand, HookConfig, MatcherGroup
from subagents.hooks.matchers import compile_matcher
from subagents.loop.scheduling import TurnResults, run_tool_calls
from subagents.permissions import (
    PermissionChecker,
    PermissionContext,
    PermissionRequest,
    decide,
    parse_rule,
)
from subagents.permissions.denials import DenialLimits
from subagents.tools.base import PermissionResult
from subagents.tools.bash import BashTool
from subagents.tools.read import ReadTool
from subagents.tools.write import WriteTool


class GuardedStep(StepTool):
    """Read-only, with a check of its own that refuses one path."""

    name = "GuardedStep"

    async def check_permissions(self, args: StepInput, ctx: ToolContext) -> PermissionResult:
        if args.path == "forbidden":
            return PermissionResult(behavior="deny", message="GuardedStep refuses this path")
        return PermissionResult(behavior="allow")


def step(path: str, name: str = "Step") -> dict[str, Any]:
    return {"name": name, "input": {"path": path}}


def read(path: Path) -> dict[str, Any]:
    return {"name": "Read", "input": {"file_path": str(path)}}


async def run(
    tmp_path: Path,
    second_turn: list[dict[str, Any]],
    *,
    settings: dict[str, Any] | None = None,
    **extra: Any,
) -> tuple[SessionResult, list[dict[str, Any]]]:
    """A main agent whose first call is one Step (so its denial counts exist) and whose second
    turn makes ``second_turn``'s calls; returns the result and the second turn's tool results."""
    turns = [{"tool_calls": [step("first")]}, {"tool_calls": second_turn}, {"text": "done"}]
    model = ScriptedModel.from_dict({"agents": [{"agent_type": "main", "turns": turns}]})
    settings_file = tmp_path / "settings.json"
    settings_file.write_text(json.dumps(settings or {}))
    options = SessionOptions(
        model=model,
        cwd=tmp_path,
        home=tmp_path / "home",
        tools=[*core_tools(), StepTool(), GuardedStep()],
        settings_file=settings_file,
        transcripts=False,
        sidecars=False,
        **extra,
    )
    result = await Session(options).run("go")
    assert result.result == "done", result.payload
    last = model.requests[-1]["messages"][-1]
    return result, [b for b in last["content"] if b["type"] == "tool_result"]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "ok.txt").write_text("fine to read\n")
    (tmp_path / "secret.txt").write_text("the secret\n")
    return tmp_path / "ok.txt", tmp_path / "secret.txt"


async def test_a_deny_rule_denies_a_read_only_call(
    tmp_path: Path, files: tuple[Path, Path]
) -> None:
    ok, secret = files
    result, blocks = await run(
        tmp_path,
        [read(ok), read(secret), step("b")],
        settings={"permissions": {"deny": ["Read(./secret.txt)", "Step(./never)"]}},
    )
    assert "fine to read" in blocks[0]["content"] and not blocks[0].get("is_error")
    assert blocks[1].get("is_error") and "the secret" not in blocks[1]["content"]
    assert "denied" in blocks[1]["content"]
    assert blocks[2]["content"] == "stepped b"
    assert [d["tool_name"] for d in result.payload["permission_denials"]] == ["Read"]


async def test_a_deny_rule_on_the_tool_denies_every_call_of_it(tmp_path: Path) -> None:
    result, blocks = await run(
        tmp_path, [step("a"), step("b")], settings={"permissions": {"deny": ["Step"]}}
    )
    assert all(b.get("is_error") and "denied" in b["content"] for b in blocks)
    assert len(result.payload["permission_denials"]) == 3  # the first call's too


async def test_an_ask_rule_asks_for_a_read_only_call(
    tmp_path: Path, files: tuple[Path, Path]
) -> None:
    asked: list[PermissionRequest] = []

    async def answer(request: PermissionRequest) -> bool:
        asked.append(request)
        return False

    ok, secret = files
    _, blocks = await run(
        tmp_path,
        [read(ok), read(secret)],
        settings={"permissions": {"ask": ["Read(./secret.txt)"]}},
        ask_callback=answer,
    )
    assert [r.tool_name for r in asked] == ["Read"]
    assert str(secret) in asked[0].subject
    # The prompt names the call it asks for, after a call allowed at once in the same turn.
    assert asked[0].tool_use_id == blocks[1]["tool_use_id"] != blocks[0]["tool_use_id"]
    assert "fine to read" in blocks[0]["content"]
    assert blocks[1].get("is_error") and "denied by the user" in blocks[1]["content"]


def pre_tool_use(answer: Mapping[str, Any], seen: list[str]) -> HookConfig:
    async def callback(data: Mapping[str, Any]) -> Mapping[str, Any]:
        seen.append(data["tool_input"]["path"])
        return answer if data["tool_input"]["path"] == "blocked" else {}

    command = HookCommand(command="python-hook", callback=callback)
    group = MatcherGroup(matcher=compile_matcher("Step"), commands=(command,))
    return HookConfig(events={"PreToolUse": (group,)})


async def test_a_pre_tool_use_hook_runs_for_read_only_calls_and_can_block_them(
    tmp_path: Path,
) -> None:
    seen: list[str] = []
    deny = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "not this one",
        }
    }
    _, blocks = await run(tmp_path, [step("a"), step("blocked")], hooks=pre_tool_use(deny, seen))
    assert sorted(seen) == ["a", "blocked", "first"]
    assert blocks[0]["content"] == "stepped a"
    assert blocks[1].get("is_error") and "not this one" in blocks[1]["content"]


async def test_a_tools_own_check_still_runs(tmp_path: Path) -> None:
    _, blocks = await run(tmp_path, [step("fine", "GuardedStep"), step("forbidden", "GuardedStep")])
    assert blocks[0]["content"] == "stepped fine"
    assert blocks[1].get("is_error") and "GuardedStep refuses this path" in blocks[1]["content"]


async def test_the_read_only_fast_path_is_taken_from_an_agents_first_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    awaited: list[str] = []
    real = PermissionChecker.__call__

    async def counting(
        self: PermissionChecker, tool: Tool[Any], args: BaseModel, ctx: ToolContext
    ) -> PermissionResult:
        awaited.append(tool.name)
        return await real(self, tool, args, ctx)

    monkeypatch.setattr(PermissionChecker, "__call__", counting)
    _, blocks = await run(tmp_path, [step("a"), step("b"), step("c")])
    assert [b["content"] for b in blocks] == ["stepped a", "stepped b", "stepped c"]
    # The first call makes the agent's denial counts at once too (as the awaited check would).
    assert awaited == []


# -- the checker's answer against the awaited one --------------------------------------------


def context(tmp_path: Path, mode: Any = "default", **kwargs: Any) -> PermissionContext:
    for key in ("allow", "deny", "ask"):
        if key in kwargs:
            kwargs[key] = tuple(parse_rule(text, "test") for text in kwargs[key])
    return PermissionContext(mode=mode, project_root=tmp_path, home=tmp_path / "home", **kwargs)


def tool_ctx(tmp_path: Path, checker: PermissionChecker | None = None) -> ToolContext:
    return ToolContext(
        cwd=tmp_path,
        roots=(tmp_path,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="a1", agent_type="general-purpose"),
        can_use_tool=checker,
    )


CONTEXTS: list[dict[str, Any]] = [
    {},
    {"mode": "plan"},
    {"mode": "bypassPermissions"},
    {"mode": "dontAsk"},
    {"mode": "acceptEdits"},
    {"deny": ["Read(./secret.txt)"]},
    {"deny": ["Write"]},
    {"ask": ["Read"]},
    {"allow": ["Read"]},
    {"tools": frozenset({"Write"})},
]
CALLS: list[tuple[Tool[Any], dict[str, Any]]] = [
    (ReadTool(), {"file_path": "secret.txt"}),
    (ReadTool(), {"file_path": "ok.txt"}),
    (WriteTool(), {"file_path": "ok.txt", "content": "x"}),
    (BashTool(), {"command": "ls"}),
]


@pytest.mark.parametrize("settings", CONTEXTS)
@pytest.mark.parametrize("call", CALLS, ids=lambda c: f"{c[0].name}:{sorted(c[1].values())}")
async def test_allowed_at_once_only_where_the_awaited_check_allows_by_the_mode(
    tmp_path: Path, settings: dict[str, Any], call: tuple[Tool[Any], dict[str, Any]]
) -> None:
    tool, data = call
    checker = PermissionChecker(context=context(tmp_path, **settings))
    ctx = tool_ctx(tmp_path, checker)
    args = tool.parse_input(data)
    checker.tracker("a1").consecutive = 2
    at_once = checker.allowed_at_once(tool, args, ctx)
    if at_once:
        # What the awaited check would say: allowed by the mode, nothing to record; and the
        # allow ends the run of denials as the awaited one does.
        verdict = decide(checker.context, tool, args, ctx)
        assert verdict.behavior == "allow" and verdict.rule is None
        assert (await checker(tool, args, ctx)).behavior == "allow"
        assert checker.tracker("a1").consecutive == 0
    else:
        assert checker.tracker("a1").consecutive == 2
    expected = tool.name == "Read" and not {"deny", "ask", "tools"} & settings.keys()
    assert at_once == expected


async def test_a_tripped_breaker_is_never_answered_at_once(tmp_path: Path) -> None:
    checker = PermissionChecker(
        context=context(tmp_path, deny=["Write"]), denial_limits=DenialLimits(max_consecutive=1)
    )
    ctx = tool_ctx(tmp_path, checker)
    write = WriteTool()
    step_tool = StepTool()
    turn = TurnResults(
        [
            {
                "type": "tool_use",
                "id": "t1",
                "name": "Write",
                "input": {"file_path": "x", "content": "y"},
            },
            {"type": "tool_use", "id": "t2", "name": "Step", "input": {"path": "p"}},
        ]
    )
    await run_tool_calls(turn, {"Write": write, "Step": step_tool}, ctx, max_concurrency=1)
    assert checker.breaker_tripped("a1")
    results = [r.block for r in turn.completed()]
    assert results[0].get("is_error")
    assert results[1].get("is_error") and "Stop retrying" in results[1]["content"]
    assert not checker.allowed_at_once(step_tool, step_tool.parse_input({"path": "p"}), ctx)
