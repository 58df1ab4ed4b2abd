"""Property: a child never allows a call its parent would not, nor holds a stronger mode.

Generated parents (mode, allow/deny/ask rules, tool sets, an inherited *asks denied* bit) get
chains of one to three children with random definition modes, requested modes, tool lists and
``disallowedTools``. Every generation step is checked against a fixed pool of calls that covers
each rule kind, compound Bash commands and paths inside and outside the working root.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.permissions import (
    PERMISSION_MODES,
    PermissionChecker,
    PermissionContext,
    PermissionRequest,
    decide,
    derive_child,
    mode_rank,
    parse_rule,
)
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolInput, ToolOutput
from subagents.tools.bash import BashTool
from subagents.tools.edit import EditTool
from subagents.tools.glob import GlobTool
from subagents.tools.grep import GrepTool
from subagents.tools.read import ReadTool
from subagents.tools.write import WriteTool


class AgentInput(ToolInput):
    prompt: str = ""
    subagent_type: str | None = None


class AgentTool(Tool[AgentInput]):
    name = "Agent"
    description = "spawn"
    input_model = AgentInput
    aliases: ClassVar[tuple[str, ...]] = ("Task",)

    async def call(self, args: AgentInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        raise NotImplementedError


class NoInput(ToolInput):
    pass


class McpGithubDelete(Tool[NoInput]):
    name = "mcp__github__delete_repo"
    description = "mcp"
    input_model = NoInput

    async def call(self, args: NoInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        raise NotImplementedError


class McpGithubRead(McpGithubDelete):
    name = "mcp__github__get_issue"

    def is_read_only(self, args: NoInput) -> bool:
        return True


BASH, READ, EDIT, WRITE = BashTool(), ReadTool(), EditTool(), WriteTool()
GLOB, GREP, AGENT = GlobTool(), GrepTool(), AgentTool()
TOOLS: list[Tool[Any]] = [BASH, READ, EDIT, WRITE, GLOB, GREP, AGENT]
TOOLS += [McpGithubDelete(), McpGithubRead()]
TOOL_NAMES = [tool.name for tool in TOOLS]

RULE_POOL = [
    "Bash",
    "Bash(git status:*)",
    "Bash(git push:*)",
    "Bash(rm:*)",
    "Bash(npm test:*)",
    "Bash(echo:*)",
    "Bash(ls:*)",
    "Bash(make clean && make)",
    "Read",
    "Read(./secrets/**)",
    "Read(.env)",
    "Edit",
    "Edit(./src/**)",
    "Write(./docs/**)",
    "Write(//etc/**)",
    "Glob",
    "Grep(./secrets)",
    "Agent",
    "Agent(Explore)",
    "Task(Plan)",
    "mcp__github",
    "mcp__github__delete_repo",
]

CALLS: list[tuple[Tool[Any], dict[str, Any]]] = [
    *(
        (BASH, {"command": command})
        for command in [
            "git status",
            "git status && rm -rf x",
            "git push origin main",
            "rm x",
            "npm test",
            "npm test; npm publish",
            "echo $(rm x)",
            "echo hi > out.txt",
            "(rm x)",
            "ls | xargs rm",
            "sudo rm x",
            "make clean && make",
            "cat secrets/key",
        ]
    ),
    (READ, {"file_path": "secrets/key"}),
    (READ, {"file_path": "src/a.py"}),
    (READ, {"file_path": "lib/.env"}),
    (READ, {"file_path": "/etc/passwd"}),
    (EDIT, {"file_path": "src/a.py", "old_string": "a", "new_string": "b"}),
    (WRITE, {"file_path": "src/a.py", "content": ""}),
    (WRITE, {"file_path": "docs/x.md", "content": ""}),
    (WRITE, {"file_path": "/etc/hosts", "content": ""}),
    (GLOB, {"pattern": "**/*.py"}),
    (GREP, {"pattern": "key", "path": "secrets"}),
    (AGENT, {"subagent_type": "Explore"}),
    (AGENT, {"subagent_type": "Plan"}),
    (AGENT, {"subagent_type": "general-purpose"}),
    (TOOLS[-2], {}),
    (TOOLS[-1], {}),
]
PARSED_CALLS: list[tuple[Tool[Any], BaseModel]] = [
    (tool, tool.input_model.model_validate(data)) for tool, data in CALLS
]
_RANK = {"deny": 0, "ask": 1, "allow": 2}

modes = st.sampled_from(PERMISSION_MODES)
rule_lists = st.lists(st.sampled_from(RULE_POOL), max_size=5, unique=True)
tool_sets = st.none() | st.frozensets(st.sampled_from(TOOL_NAMES))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("prop") / "repo"
    (root / "src").mkdir(parents=True)
    return root.resolve()


def tool_ctx(repo: Path, agent_id: str) -> ToolContext:
    return ToolContext(
        cwd=repo,
        roots=(repo,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id=agent_id, agent_type="general-purpose"),
    )


def outcome(context: PermissionContext, tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> str:
    """The verdict after the mode's own ask handling (``dontAsk`` turns ask into deny)."""
    behavior = decide(context, tool, args, ctx).behavior
    return "deny" if behavior == "ask" and context.denies_asks else behavior


def escalations(parent: PermissionContext, child: PermissionContext, repo: Path) -> list[str]:
    """Every way ``child`` exceeds ``parent``; empty when the child is within bounds."""
    found = []
    if mode_rank(child.mode) > mode_rank(parent.mode):
        found.append(f"mode {child.mode} > {parent.mode}")
    if parent.denies_asks and not child.denies_asks:
        found.append("child may ask where the parent may not")
    if parent.tools is not None and (child.tools is None or not child.tools <= parent.tools):
        found.append(f"tools {child.tools} not within {parent.tools}")
    if not set(parent.deny) <= set(child.deny):
        found.append("a deny rule was dropped")
    ctx = tool_ctx(repo, "x")
    for tool, args in PARSED_CALLS:
        mine, theirs = outcome(child, tool, args, ctx), outcome(parent, tool, args, ctx)
        if _RANK[mine] > _RANK[theirs]:
            found.append(f"{tool.name} {args.model_dump()}: child {mine}, parent {theirs}")
    return found


@st.composite
def parents(draw: st.DrawFn, repo: Path) -> PermissionContext:
    source = "/settings.json"
    return PermissionContext(
        mode=draw(modes),
        project_root=repo,
        home=repo.parent,
        allow=tuple(parse_rule(r, source) for r in draw(rule_lists)),
        deny=tuple(parse_rule(r, source) for r in draw(rule_lists)),
        ask=tuple(parse_rule(r, source) for r in draw(rule_lists)),
        tools=draw(tool_sets),
        asks_denied=draw(st.booleans()),
    )


child_specs = st.fixed_dictionaries(
    {
        "definition_mode": st.none() | modes,
        "requested_mode": st.none() | modes,
        "tools": st.none() | st.lists(st.sampled_from(TOOL_NAMES), max_size=6),
        "disallowed_tools": st.lists(st.sampled_from(TOOL_NAMES), max_size=3),
    }
)


@settings(max_examples=1000, deadline=None)
@given(data=st.data(), specs=st.lists(child_specs, min_size=1, max_size=3))
def test_child_never_exceeds_parent(
    repo: Path, data: st.DataObject, specs: list[dict[str, Any]]
) -> None:
    root = data.draw(parents(repo))
    chain = [root]
    for spec in specs:
        chain.append(derive_child(chain[-1], **spec))
    for parent, child in itertools.pairwise(chain):
        assert escalations(parent, child, repo) == []
    assert escalations(root, chain[-1], repo) == []


@settings(max_examples=1000, deadline=None)
@given(data=st.data(), spec=child_specs, background=st.booleans(), route=st.booleans())
def test_child_checker_never_allows_what_the_parent_checker_denies(
    repo: Path, data: st.DataObject, spec: dict[str, Any], background: bool, route: bool
) -> None:
    """The same, end to end through the checkers, with a user who approves every prompt."""

    async def approve(request: PermissionRequest) -> bool:
        return True

    root = data.draw(parents(repo))
    parent = PermissionChecker(
        context=root, ask_callback=approve, route_background_asks=route, denial_limits=None
    )
    child = parent.for_child(derive_child(root, **spec), background=background)

    async def run() -> list[tuple[str, str, str]]:
        results: list[tuple[str, str, str]] = []
        for tool, args in PARSED_CALLS:
            mine = await child(tool, args, tool_ctx(repo, "child"))
            theirs = await parent(tool, args, tool_ctx(repo, "parent"))
            results.append((tool.name, mine.behavior, theirs.behavior))
        return results

    for name, mine, theirs in asyncio.run(run()):
        assert not (mine == "allow" and theirs != "allow"), name


def test_the_property_catches_an_uncapped_child(repo: Path) -> None:
    """Without the cap (Claude Code bug #52557) the same check reports the escalation."""
    parent = PermissionContext(mode="default", project_root=repo, home=repo.parent)
    escaped = replace(parent, mode="bypassPermissions")
    problems = escalations(parent, escaped, repo)
    assert "mode bypassPermissions > default" in problems
    assert any(p.startswith("Bash {'command': 'rm x'") for p in problems)
    from_dont_ask = replace(parent, mode="dontAsk")
    assert escalations(from_dont_ask, replace(from_dont_ask, mode="plan"), repo) != []
