"""Agent definitions: Claude Code files, sources and precedence, built-ins, tools, verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from subagents.agents.agent_file import parse_agent_markdown
from subagents.agents.builtin import EXPLORE, PLAN, VERIFICATION, parse_verdict
from subagents.agents.cli_agents import parse_cli_agents
from subagents.agents.definitions import (
    AgentDefinition,
    DefinitionSet,
    load_definitions,
    resolve_tool_names,
)

REVIEWER = """\
---
name: code-reviewer
description: Reviews code for quality and security. Use after writing code.
tools: Read, Grep, Glob, Bash(git diff:*, git log:*)
disallowedTools:
  - Write
model: sonnet
permissionMode: acceptEdits
maxTurns: 12
background: true
isolation: worktree
color: blue
memory: project
skills: [lint, style]
mcpServers:
  - github
  - local: {command: srv}
requiredMcpServers: github
hooks:
  PreToolUse:
    - matcher: Bash
      hooks: [{type: command, command: "true"}]
effort: high
---
You are a senior code reviewer.

Be kind.
"""


def write(folder: Path, filename: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / filename
    path.write_text(text, encoding="utf-8")
    return path


def agent_md(
    name: str, description: str = "does things", body: str = "prompt", **extra: str
) -> str:
    lines = [f"name: {name}", f"description: {description}"]
    lines += [f"{key}: {value}" for key, value in extra.items()]
    return "---\n" + "\n".join(lines) + f"\n---\n{body}\n"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.delenv("SUBAGENTS_HOME", raising=False)
    home = tmp_path / "home"
    project = tmp_path / "project"
    home.mkdir()
    (project / ".git").mkdir(parents=True)
    return {"home": home, "project": project, "subagents_home": home / ".subagents"}


def load(env: dict[str, Path], **kwargs: object) -> DefinitionSet:
    return load_definitions(
        cwd=env["project"],
        home=env["home"],
        subagents_home=env["subagents_home"],
        **kwargs,  # type: ignore[arg-type]
    )


# --- one file -------------------------------------------------------------------------------


def test_claude_code_file_with_every_field() -> None:
    parsed = parse_agent_markdown(REVIEWER, path="r.md", source="project")
    assert parsed.error is None
    d = parsed.definition
    assert d is not None
    assert d.name == "code-reviewer"
    assert d.tools == ("Read", "Grep", "Glob", "Bash(git diff:*, git log:*)")
    assert d.disallowed_tools == ("Write",)
    assert (d.model, d.permission_mode, d.max_turns) == ("sonnet", "acceptEdits", 12)
    assert (d.background, d.isolation, d.color, d.memory) == (True, "worktree", "blue", "project")
    assert d.skills == ("lint", "style")
    assert d.mcp_servers == ("github", {"local": {"command": "srv"}})
    assert d.required_mcp_servers == ("github",)
    assert d.hooks is not None and d.hooks["PreToolUse"][0]["matcher"] == "Bash"
    assert d.system_prompt == "You are a senior code reviewer.\n\nBe kind."
    assert (d.source, d.path) == ("project", "r.md")
    # Unknown field: kept and warned about, never fatal.
    assert d.extra == {"effort": "high"}
    assert parsed.warnings == ["r.md: effort: unknown field, kept but not used (line 23)"]


def test_tools_as_yaml_list() -> None:
    text = "---\nname: a\ndescription: d\ntools:\n  - Read\n  - Grep\n---\nbody\n"
    parsed = parse_agent_markdown(text, path="a.md", source="user")
    assert parsed.definition is not None
    assert parsed.definition.tools == ("Read", "Grep")


@pytest.mark.parametrize("tools", ["", '""', "[]", "''"])
def test_empty_tools_mean_no_tools_as_in_claude_code(tools: str) -> None:
    # Claude Code: `tools:` with no value, [] or "" gives the agent no tools. Reading them as
    # "inherit every tool" was a permission widening.
    text = f"---\nname: a\ndescription: d\ntools: {tools}\n---\nbody\n"
    parsed = parse_agent_markdown(text, path="a.md", source="user")
    assert parsed.definition is not None, parsed.error
    assert parsed.definition.tools == ()


@pytest.mark.parametrize("tools", ["'*'", "*", "Read, *", "[Read, '*']", None])
def test_star_or_missing_tools_mean_every_tool(tools: str | None) -> None:
    line = "" if tools is None else f"tools: {tools}\n"
    text = f"---\nname: a\ndescription: d\n{line}---\nbody\n"
    parsed = parse_agent_markdown(text, path="a.md", source="user")
    assert parsed.definition is not None, parsed.error
    assert parsed.definition.tools is None


def test_unquoted_colon_description_still_loads() -> None:
    # Claude Code users write this all the time; strict YAML rejects it.
    text = "---\nname: helper\ndescription: Use when: the user asks. Example: x\n---\nbody\n"
    parsed = parse_agent_markdown(text, path="h.md", source="user")
    assert parsed.definition is not None
    assert parsed.definition.description == "Use when: the user asks. Example: x"


@pytest.mark.parametrize(
    ("text", "field", "line"),
    [
        ("---\nname: a\ndescription: d\n", "frontmatter", 1),
        (
            "---\nname: a\ndescription: d\ntools:\n  - Read\n  x: [y\n---\nbody\n",
            "frontmatter",
            None,
        ),
        ("---\n- a\n- b\n---\nbody\n", "frontmatter", 2),
        ("---\ndescription: d\n---\nbody\n", "name", None),
        ("---\nname: a\n---\nbody\n", "description", None),
        ("---\nname: 123\ndescription: d\n---\nb\n", "name", 2),
        ("---\nname: '  '\ndescription: d\n---\nb\n", "name", 2),
        ("---\nname: a\ndescription: [x, y]\n---\nb\n", "description", 3),
    ],
)
def test_malformed_file_gives_one_error_naming_field(
    text: str, field: str, line: int | None
) -> None:
    parsed = parse_agent_markdown(text, path="bad.md", source="project")
    assert parsed.definition is None
    assert parsed.error is not None
    assert (parsed.error.file, parsed.error.field) == ("bad.md", field)
    if line is not None:
        assert parsed.error.line == line
    assert str(parsed.error).startswith(f"bad.md: {field}: ")


def test_invalid_yaml_reports_line() -> None:
    text = "---\nname: a\ndescription: d\ntools:\n  - Read\n  x: [y\ncolor: red\n---\nbody\n"
    parsed = parse_agent_markdown(text, path="bad.md", source="project")
    assert parsed.error is not None
    assert parsed.error.line is not None and parsed.error.line >= 4
    assert "invalid YAML" in parsed.error.message


# --- sources and precedence -----------------------------------------------------------------


def test_builtins_present(env: dict[str, Path]) -> None:
    loaded = load(env)
    assert loaded.names() == ["general-purpose", "Explore", "Plan", "verification"]
    assert loaded.errors == []
    assert all(d.source == "built-in" and d.path is None for d in loaded.definitions.values())


def test_precedence_user_then_project_then_cli(env: dict[str, Path]) -> None:
    home, project = env["home"], env["project"]
    write(home / ".claude" / "agents", "a.md", agent_md("shared", "from claude user"))
    write(env["subagents_home"] / "agents", "a.md", agent_md("shared", "from subagents user"))
    write(home / ".claude" / "agents", "u.md", agent_md("only-user", "u"))
    loaded = load(env)
    shared = loaded.find("shared")
    assert shared is not None and shared.description == "from subagents user"
    assert shared.source == "user"
    assert shared.path == str(env["subagents_home"] / "agents" / "a.md")

    write(project / ".claude" / "agents", "a.md", agent_md("shared", "from claude project"))
    shared = load(env).find("shared")
    assert shared is not None and shared.description == "from claude project"
    write(project / ".subagents" / "agents", "a.md", agent_md("shared", "from project"))
    shared = load(env).find("shared")
    assert shared is not None and (shared.description, shared.source) == ("from project", "project")

    cli = json.dumps({"shared": {"description": "from cli", "prompt": "p"}})
    loaded = load(env, cli_agents=cli)
    shared = loaded.find("shared")
    assert shared is not None and (shared.description, shared.source) == ("from cli", "cli")
    assert shared.system_prompt == "p"
    assert loaded.find("only-user") is not None


def test_subagents_home_env_default(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    other = env["home"].parent / "elsewhere"
    write(other / "agents", "x.md", agent_md("from-env"))
    monkeypatch.setenv("SUBAGENTS_HOME", str(other))
    loaded = load_definitions(cwd=env["project"], home=env["home"])
    assert loaded.find("from-env") is not None


def test_project_overrides_builtin_explore_but_not_verification(env: dict[str, Path]) -> None:
    folder = env["project"] / ".claude" / "agents"
    write(folder, "explore.md", agent_md("explore", "my explorer", body="custom"))
    verify = write(folder, "verify.md", agent_md("Verification", "fake checker"))
    loaded = load(env)
    explore = loaded.find("Explore")
    assert explore is not None
    assert (explore.name, explore.source, explore.system_prompt) == ("explore", "project", "custom")
    assert not explore.read_only  # the built-in's slimmed context does not carry over
    assert "Explore" not in loaded.definitions  # replaced, not listed twice
    assert loaded.find("verification") is VERIFICATION
    [error] = loaded.errors
    assert (error.file, error.field) == (str(verify), "name")
    assert "'verification' is reserved" in error.message


def test_broken_file_reported_while_others_load(env: dict[str, Path]) -> None:
    folder = env["project"] / ".claude" / "agents"
    write(folder, "a.md", agent_md("alpha"))
    broken = write(folder, "b.md", "---\nname: beta\n---\nx\n")
    write(folder, "c.md", agent_md("gamma"))
    write(folder, "notes.txt", "not an agent")
    loaded = load(env)
    assert loaded.find("alpha") is not None and loaded.find("gamma") is not None
    assert loaded.find("beta") is None
    [error] = loaded.errors
    assert (error.file, error.field) == (str(broken), "description")


def test_untrusted_workspace_ignores_project_sources(env: dict[str, Path]) -> None:
    write(env["project"] / ".claude" / "agents", "p.md", agent_md("proj-agent"))
    write(env["project"] / ".subagents" / "agents", "q.md", agent_md("proj-agent-2"))
    write(env["home"] / ".claude" / "agents", "u.md", agent_md("user-agent"))
    untrusted = load(env, trusted=False)
    assert untrusted.find("proj-agent") is None and untrusted.find("proj-agent-2") is None
    assert untrusted.find("user-agent") is not None
    trusted = load(env)
    assert trusted.find("proj-agent") is not None and trusted.find("proj-agent-2") is not None


def test_project_agents_found_from_subfolder_up_to_git_root(env: dict[str, Path]) -> None:
    write(env["project"] / ".claude" / "agents", "p.md", agent_md("proj-agent"))
    sub = env["project"] / "src" / "pkg"
    sub.mkdir(parents=True)
    loaded = load_definitions(cwd=sub, home=env["home"], subagents_home=env["subagents_home"])
    assert loaded.find("proj-agent") is not None


def test_folders_above_git_root_are_not_project_sources(tmp_path: Path) -> None:
    write(tmp_path / "outer" / ".claude" / "agents", "o.md", agent_md("outer-agent"))
    repo = tmp_path / "outer" / "repo"
    (repo / ".git").mkdir(parents=True)
    loaded = load_definitions(cwd=repo, home=tmp_path / "h", subagents_home=tmp_path / "s")
    assert loaded.find("outer-agent") is None


def test_symlink_outside_folder_skipped_with_warning(env: dict[str, Path], tmp_path: Path) -> None:
    outside = write(tmp_path / "elsewhere", "evil.md", agent_md("evil"))
    folder = env["project"] / ".claude" / "agents"
    write(folder, "ok.md", agent_md("fine"))
    (folder / "evil.md").symlink_to(outside)
    inner = write(folder / "sub", "inner.md", agent_md("inner"))
    (folder / "link.md").symlink_to(inner)
    loaded = load(env)
    assert loaded.find("evil") is None
    assert loaded.find("fine") is not None and loaded.find("inner") is not None
    assert any("evil.md" in w and "outside" in w for w in loaded.warnings)


def test_duplicate_name_in_one_folder_warns(env: dict[str, Path]) -> None:
    folder = env["project"] / ".claude" / "agents"
    write(folder, "1.md", agent_md("dup", "first"))
    write(folder, "2.md", agent_md("dup", "second"))
    loaded = load(env)
    found = loaded.find("dup")
    assert found is not None and found.description == "second"
    assert any("also defined" in w for w in loaded.warnings)


# --- --agents JSON --------------------------------------------------------------------------


def test_cli_agents_good() -> None:
    text = json.dumps(
        {
            "reviewer": {
                "description": "Reviews",
                "prompt": "You review.",
                "tools": ["Read", "Grep"],
                "disallowedTools": "Bash",
                "model": "haiku",
                "permissionMode": "plan",
                "maxTurns": 3,
                "background": True,
                "isolation": "worktree",
            }
        }
    )
    [definition], errors = parse_cli_agents(text)
    assert errors == []
    assert definition.tools == ("Read", "Grep")
    assert definition.disallowed_tools == ("Bash",)
    assert (definition.model, definition.permission_mode, definition.max_turns) == (
        "haiku",
        "plan",
        3,
    )
    assert (definition.source, definition.path, definition.system_prompt) == (
        "cli",
        None,
        "You review.",
    )


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("{not json", "json"),
        ("[1, 2]", "json"),
        ('{"r": "just a string"}', "r"),
        ('{"r": {"prompt": "p"}}', "r.description"),
        ('{"r": {"description": "d"}}', "r.prompt"),
        ('{"r": {"description": "d", "prompt": "p", "maxTurns": "3"}}', "r.maxTurns"),
        ('{"r": {"description": "d", "prompt": "p", "tools": [1]}}', "r.tools"),
        ('{"r": {"description": "d", "prompt": "p", "isolation": "vm"}}', "r.isolation"),
        ('{"r": {"description": "d", "prompt": "p", "maxTurn": 3}}', "r.maxTurn"),
        ('{"r": {"description": "d", "prompt": "p", "background": "yes"}}', "r.background"),
        ('{"VERIFICATION": {"description": "d", "prompt": "p"}}', "VERIFICATION.name"),
        ('{" ": {"description": "d", "prompt": "p"}}', "' '.name"),
    ],
)
def test_cli_agents_bad(text: str, field: str) -> None:
    definitions, errors = parse_cli_agents(text)
    assert definitions == []
    [error] = errors
    assert (error.file, error.field) == ("--agents", field)


def test_cli_error_does_not_hide_good_cli_entries(env: dict[str, Path]) -> None:
    text = json.dumps({"good": {"description": "d", "prompt": "p"}, "bad": {"description": "d"}})
    loaded = load(env, cli_agents=text)
    assert loaded.find("good") is not None
    [error] = loaded.cli_errors()
    assert error.field == "bad.prompt"


# --- find -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("general_purpose", "general-purpose"),
        ("General Purpose", "general-purpose"),
        ("GENERAL-PURPOSE", "general-purpose"),
        ("explore", "Explore"),
        ("plan", "Plan"),
        ("Verification", "verification"),
    ],
)
def test_find_ignores_case_and_separators(env: dict[str, Path], query: str, name: str) -> None:
    found = load(env).find(query)
    assert found is not None and found.name == name


def test_find_unknown_is_none(env: dict[str, Path]) -> None:
    assert load(env).find("generalpurposes") is None


# --- tools ----------------------------------------------------------------------------------

AVAILABLE = [
    "Agent",
    "Read",
    "Write",
    "Edit",
    "Glob",
    "Grep",
    "Bash",
    "TeamCreate",
    "EnterWorktree",
    "ExitWorktree",
    "mcp__github__issues",
    "mcp__github__prs",
    "mcp__slack__post",
]


def definition(**kwargs: object) -> AgentDefinition:
    return AgentDefinition(name="t", description="d", source="cli", **kwargs)  # type: ignore[arg-type]


def test_inherit_all_minus_always_blocked_and_agent() -> None:
    assert resolve_tool_names(definition(), AVAILABLE) == [
        "Read",
        "Write",
        "Edit",
        "Glob",
        "Grep",
        "Bash",
        "mcp__github__issues",
        "mcp__github__prs",
        "mcp__slack__post",
    ]


def test_listed_tools_keep_available_order_and_ignore_unknown() -> None:
    d = definition(tools=("Bash(git status:*)", "Read", "NoSuchTool"))
    assert resolve_tool_names(d, AVAILABLE) == ["Read", "Bash"]


def test_disallowed_always_wins() -> None:
    d = definition(tools=("Read", "Write", "Bash"), disallowed_tools=("Write", "Bash(rm:*)"))
    assert resolve_tool_names(d, AVAILABLE) == ["Read"]
    assert "Edit" not in resolve_tool_names(definition(disallowed_tools=("Edit",)), AVAILABLE)


def test_agent_tool_only_when_listed_explicitly() -> None:
    assert resolve_tool_names(definition(tools=("Agent", "Read")), AVAILABLE) == ["Agent", "Read"]
    # "Task" is the alias and grants the Agent tool too.
    assert resolve_tool_names(definition(tools=("Task",)), AVAILABLE) == ["Agent"]
    assert resolve_tool_names(definition(tools=("Task",)), ["Task", "Read"]) == ["Task"]
    denied = definition(tools=("Agent",), disallowed_tools=("Task",))
    assert resolve_tool_names(denied, AVAILABLE) == []


def test_always_blocked_even_when_listed() -> None:
    d = definition(tools=("TeamCreate", "EnterWorktree", "ExitWorktree", "Read"))
    assert resolve_tool_names(d, AVAILABLE) == ["Read"]


def test_mcp_server_entry_grants_its_tools() -> None:
    d = definition(tools=("mcp__github",))
    assert resolve_tool_names(d, AVAILABLE) == ["mcp__github__issues", "mcp__github__prs"]
    starred = definition(tools=("mcp__github__*", "mcp__slack__post"))
    assert resolve_tool_names(starred, AVAILABLE) == [
        "mcp__github__issues",
        "mcp__github__prs",
        "mcp__slack__post",
    ]
    denied = definition(disallowed_tools=("mcp__github__*", "mcp__slack__post"))
    assert not [t for t in resolve_tool_names(denied, AVAILABLE) if t.startswith("mcp__")]
    prefix = definition(tools=("mcp__git",))  # a server's name, not a prefix of another's
    assert resolve_tool_names(prefix, AVAILABLE) == []


@pytest.mark.parametrize("builtin", [EXPLORE, PLAN, VERIFICATION])
def test_read_only_builtins_cannot_edit(builtin: AgentDefinition) -> None:
    tools = resolve_tool_names(builtin, AVAILABLE)
    assert tools == ["Read", "Glob", "Grep", "Bash"]
    assert {"Write", "Edit", "NotebookEdit", "Agent"} <= set(builtin.disallowed_tools)


def test_builtin_flags_and_prompts() -> None:
    assert EXPLORE.read_only and PLAN.read_only
    assert not VERIFICATION.read_only
    assert "read-only" in EXPLORE.system_prompt and "Bash" in EXPLORE.system_prompt
    assert "plan" in PLAN.system_prompt.lower()
    assert "VERDICT: PASS" in VERIFICATION.system_prompt
    assert VERIFICATION.critical_reminder is not None


# --- verdicts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("ran pytest: exit 0\nVERDICT: PASS", "PASS"),
        ("evidence...\nVERDICT: FAIL\n", "FAIL"),
        ("VERDICT: PARTIAL\n\n", "PARTIAL"),
        ("**VERDICT: PASS**", "PASS"),
        ("## VERDICT: FAIL", "FAIL"),
        ("no verdict here", None),
        ("VERDICT: PASS\nVERDICT: FAIL", None),
        ("VERDICT: PASS\nVERDICT: PASS", None),
        ("VERDICT: MAYBE", None),
        ("VERDICT: PASS\nVERDICT: unsure", None),
        ("VERDICT: pass", None),
        ("The VERDICT: PASS is what I'd give", None),
        ("VERDICT: PASS because tests ran", None),
    ],
)
def test_parse_verdict(text: str, verdict: str | None) -> None:
    assert parse_verdict(text) == verdict
