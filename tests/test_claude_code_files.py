"""Claude Code's agent files and settings load as Claude Code loads them, through the CLI.

The fixtures in ``tests/fixtures/claude_code/`` are our own files, one per case of issue 15's
table plus the cases that must stay errors; ``agents-expected.json`` and
``settings-expected.json`` say what each must do (for a definition: loaded with this name,
description and tools / skipped as not an agent file / refused naming this field; for a
settings file: runs with these warnings / refuses to start with this error).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import agent_call, recorded, run_cli, run_script, tool_call, write_script
from subagents import (
    Event,
    InitEvent,
    ScriptedModel,
    Session,
    SessionOptions,
    SystemEvent,
    ToolContext,
    tool,
)
from subagents.cli.headless import run_headless
from subagents.cli.main import build_parser, main

FIXTURES = Path(__file__).parent / "fixtures" / "claude_code"
AGENTS: dict[str, dict[str, Any]] = json.loads(
    (FIXTURES / "agents-expected.json").read_text(encoding="utf-8")
)
SETTINGS: dict[str, dict[str, Any]] = json.loads((FIXTURES / "settings-expected.json").read_text())


def test_the_fixture_set_is_as_large_as_promised() -> None:
    assert len(list((FIXTURES / "agents").iterdir())) == len(AGENTS) >= 40
    assert len(list((FIXTURES / "settings").iterdir())) == len(SETTINGS) >= 15
    outcomes = {entry["outcome"] for entry in AGENTS.values()}
    assert outcomes == {"loaded", "skipped", "refused"}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project holding every definition fixture in ``.claude/agents``; HOME is empty."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    folder = tmp_path / "project" / ".claude" / "agents"
    shutil.copytree(FIXTURES / "agents", folder)
    return tmp_path / "project"


def _env(project: Path) -> dict[str, str]:
    return {"HOME": str(project.parent / "home")}


def test_definitions_list_with_claude_codes_names_descriptions_and_tools(project: Path) -> None:
    run = run_cli("agents", "list", "--json", "--cwd", str(project), cwd=project, env=_env(project))
    assert run.code == 0, run.stderr
    listed = {Path(entry["path"]).name: entry for entry in json.loads(run.stdout) if entry["path"]}
    loaded = {name: want for name, want in AGENTS.items() if want["outcome"] == "loaded"}
    assert set(listed) == set(loaded)
    for name, want in loaded.items():
        got = listed[name]
        assert (got["name"], got["description"], got["tools"]) == (
            want["name"],
            want["description"],
            want["tools"],
        ), name
        assert got["source"] == "project"


def test_validate_fails_only_for_files_claude_code_refuses_and_says_why(project: Path) -> None:
    run = run_cli("agents", "validate", "--cwd", str(project), cwd=project, env=_env(project))
    assert run.code == 1
    refused = {name: want for name, want in AGENTS.items() if want["outcome"] == "refused"}
    lines = run.stdout.splitlines()
    assert len(lines) == len(refused), run.stdout
    folder = project / ".claude" / "agents"
    for name, want in refused.items():
        [line] = [line for line in lines if line.startswith(f"{folder / name}: ")]
        assert line.startswith(f"{folder / name}: {want['field']}: "), line
    for name, want in AGENTS.items():
        if want["outcome"] == "skipped":
            assert f"warning: {folder / name}: skipped, not an agent definition" in run.stderr
        for expected in want.get("warn", []):
            assert any(
                line.startswith(f"warning: {folder / name}: ") and expected in line
                for line in run.stderr.splitlines()
            ), (name, expected)


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_each_definition_file_validates_on_its_own(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    want = AGENTS[name]
    path = FIXTURES / "agents" / name
    code = main(["agents", "validate", str(path)])
    out = capsys.readouterr().out
    if want["outcome"] == "refused":
        assert code == 1
        assert out.startswith(f"{path}: {want['field']}: "), out
    else:
        assert (code, out) == (0, "")


def _headless(argv: list[str]) -> int:
    """The CLI's ``-p`` path in this process (``main`` minus its process-wide tuning)."""
    args: argparse.Namespace = build_parser().parse_args(argv)
    return run_headless(args)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_each_settings_file_through_the_cli(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    want = SETTINGS[name]
    monkeypatch.setenv("HOME", str(tmp_path))
    script = write_script(tmp_path, [{"agent_type": "main", "turns": [{"text": "done"}]}])
    path = FIXTURES / "settings" / name
    argv = ["-p", "go", "--model", f"scripted:{script}", "--output-format", "json"]
    code = _headless([*argv, "--settings", str(path), "--cwd", str(tmp_path)])
    captured = capsys.readouterr()
    if want["outcome"] == "refused":
        assert code == 2
        assert captured.out == ""
        assert captured.err.startswith(f"subagents: error: {path}"), captured.err
        assert want["error"] in captured.err
        return
    assert code == 0, captured.err
    warnings = json.loads(captured.out)["warnings"]
    assert len(warnings) == len(want["warn"]), warnings
    for expected, got in zip(want["warn"], warnings, strict=True):
        assert got.startswith(f"{path}: ") and expected in got


# -- warnings reach the user in every output format ------------------------------------------


WARNED = FIXTURES / "settings" / "unsupported-events.json"


def test_warnings_reach_the_user_in_every_output_format(tmp_path: Path) -> None:
    (tmp_path / ".claude" / "agents").mkdir(parents=True)
    (tmp_path / ".claude" / "agents" / "odd.md").write_text(
        "---\nname: odd\ndescription: d\nmaxTurns: 0\n---\nbody\n"
    )
    script = write_script(tmp_path, [{"agent_type": "main", "turns": [{"text": "done"}]}])
    expected = [*SETTINGS["unsupported-events.json"]["warn"], "maxTurns: 0 is not a positive"]
    env = {"HOME": str(tmp_path / "home")}

    text = run_script(script, tmp_path, "--settings", str(WARNED), output_format="text", env=env)
    assert (text.code, text.stdout) == (0, "done\n"), text.stderr
    lines = [line for line in text.stderr.splitlines() if line.startswith("subagents: warning: ")]
    assert len(lines) == len(expected)
    for want in expected:
        assert any(want in line for line in lines), want

    stream = run_script(script, tmp_path, "--settings", str(WARNED), output_format="stream-json")
    events = stream.events()
    assert events[0]["subtype"] == "init"
    shown = [e["message"] for e in events if e["type"] == "system" and e["subtype"] == "warning"]
    assert len(shown) == len(expected)
    assert all(e["type"] == "system" for e in events[1 : 1 + len(expected)]), "right after init"

    run = run_script(script, tmp_path, "--settings", str(WARNED), env=env)
    result = run.json()
    assert result["warnings"] == shown
    printed = [line for line in run.stderr.splitlines() if line.startswith("subagents: warning: ")]
    assert printed == [f"subagents: warning: {message}" for message in shown], run.stderr
    for want in expected:
        assert any(want in message for message in shown), want


# -- hook `if` and frontmatter hooks, end to end ---------------------------------------------


def test_a_force_push_blocker_with_if_blocks_only_force_pushes(tmp_path: Path) -> None:
    """A public force-push blocker: without `if`, it denied every Bash call."""
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            tool_call("Bash", command="echo plain-call-ran"),
                            tool_call("Bash", command="git push --force origin main"),
                            tool_call("Bash", command="FOO=1 git push origin main --force"),
                        ]
                    },
                    {"text": "{{tool_results}}"},
                ],
            }
        ],
    )
    settings = FIXTURES / "settings" / "if-force-push.json"
    run = run_script(
        script, tmp_path, "--settings", str(settings), "--permission-mode", "bypassPermissions"
    )
    assert run.code == 0, run.stderr
    plain, force, assigned = run.json()["result"].split("\n", 2)
    assert plain == "plain-call-ran"
    assert "force push blocked by policy" in force
    assert "force push blocked by policy" in assigned


def test_frontmatter_hooks_run_without_any_settings_hook(tmp_path: Path) -> None:
    folder = tmp_path / ".claude" / "agents"
    folder.mkdir(parents=True)
    (folder / "guarded.md").write_text(
        "---\nname: guarded\ndescription: d\ntools: Bash\nhooks:\n  PreToolUse:\n"
        "    - matcher: Bash\n      hooks:\n        - type: command\n"
        "          command: echo 'guarded by its own hook' >&2; exit 2\n---\nbody\n"
    )
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            tool_call("Agent", description="d", prompt="p", subagent_type="guarded")
                        ]
                    },
                    {"text": "{{tool_results}}"},
                ],
            },
            {
                "agent_type": "guarded",
                "turns": [
                    {"tool_calls": [tool_call("Bash", command="touch ran.txt")]},
                    {"text": "child saw: {{tool_results}}"},
                ],
            },
        ],
    )
    run = run_script(script, tmp_path, "--permission-mode", "bypassPermissions")
    assert run.code == 0, run.stderr
    assert "guarded by its own hook" in run.json()["result"]
    assert not (tmp_path / "ran.txt").exists()


def test_children_get_the_tools_claude_code_gives_them(tmp_path: Path) -> None:
    """`tools: []` is no tools (it was every tool: a permission widening); spaces separate."""
    folder = tmp_path / ".claude" / "agents"
    folder.mkdir(parents=True)
    for name in ("tools-empty-list.md", "tools-no-value.md", "tools-spaces.md", "name-spaces.md"):
        shutil.copy(FIXTURES / "agents" / name, folder / name)
    calls = [
        tool_call("Agent", description="d", prompt=f"job {kind}", subagent_type=kind)
        for kind in ("tools-empty-list", "tools-no-value", "tools-spaces", "Python Testing Expert")
    ]
    children = [
        {"agent_type": kind, "turns": [{"text": f"{kind} done"}]}
        for kind in ("tools-empty-list", "tools-no-value", "tools-spaces", "Python Testing Expert")
    ]
    script = write_script(
        tmp_path,
        [{"agent_type": "main", "turns": [{"tool_calls": calls}, {"text": "ok"}]}, *children],
    )
    run = run_script(script, tmp_path, env={"HOME": str(tmp_path / "home")})
    assert run.code == 0, run.stderr
    tools = {
        request["agent_type"]: {tool["name"] for tool in request["tools"]}
        for request in recorded(tmp_path)
    }
    assert tools["tools-empty-list"] == set()
    assert tools["tools-no-value"] == set()
    assert tools["tools-spaces"] == {"Read", "Grep", "Glob"}
    assert tools["Python Testing Expert"] == {"Read", "Write"}


def test_a_name_that_is_not_a_file_name_is_never_used_as_a_path(tmp_path: Path) -> None:
    folder = tmp_path / "repo" / ".claude" / "agents"
    folder.mkdir(parents=True)
    (folder / "odd.md").write_text(
        "---\nname: ../../etc/x\ndescription: d\ntools: Read\nisolation: worktree\n---\nbody\n"
    )
    repo = tmp_path / "repo"
    for args in (
        ["init", "-q"],
        ["add", "."],
        ["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "init"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True)
    script = write_script(
        repo,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            tool_call(
                                "Agent", description="d", prompt="p", subagent_type="../../etc/x"
                            )
                        ]
                    },
                    {"text": "{{tool_results}}"},
                ],
            },
            {"agent_type": "../../etc/x", "turns": [{"text": "odd child done"}]},
        ],
    )
    home = tmp_path / "state"
    env = {"HOME": str(tmp_path / "home"), "SUBAGENTS_HOME": str(home)}
    before = set(tmp_path.rglob("*"))
    run = run_script(script, repo, env=env)
    assert run.code == 0, run.stderr
    [child] = run.json()["agents"][1:]
    assert (child["agentType"], child["status"]) == ("../../etc/x", "completed")
    tasks = run_cli("tasks", "list", "--json", cwd=repo, env=env)
    assert [t["agentType"] for t in json.loads(tasks.stdout)] == ["../../etc/x"], tasks.stderr
    created = set(tmp_path.rglob("*")) - before
    outside = [p for p in created if not p.is_relative_to(home) and not p.is_relative_to(repo)]
    assert outside == []
    assert not any(p.name == "x" for p in created), "the name became a path"
    assert any(child["agentId"] in p.name for p in created if p.is_relative_to(home))


def test_an_agent_whose_hooks_are_malformed_refuses_to_start(tmp_path: Path) -> None:
    """Claude Code drops malformed frontmatter hooks and runs the agent unguarded; here it lists
    (with a warning) but refuses to start until they are fixed."""
    folder = tmp_path / ".claude" / "agents"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "agents" / "hooks-malformed.md", folder / "hooks-malformed.md")
    call = tool_call("Agent", description="d", prompt="p", subagent_type="hooks-malformed")
    script = write_script(
        tmp_path,
        [
            {"agent_type": "main", "turns": [{"tool_calls": [call]}, {"text": "{{tool_results}}"}]},
            {"agent_type": "hooks-malformed", "turns": [{"text": "child ran"}]},
        ],
    )
    run = run_script(script, tmp_path, env={"HOME": str(tmp_path / "home")})
    assert run.code == 0, run.stderr
    result = run.json()
    assert "hooks.PreToolUse[0].hooks[0].command: field required" in result["result"]
    assert "child ran" not in result["result"]
    assert len(result["agents"]) == 1, "the child never started"
    assert any("refuse to start until its hooks are fixed" in w for w in result["warnings"])


def _strings(value: object) -> list[str]:
    """Every string inside a recorded request (its system text, messages and tool schemas)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def test_the_model_reads_an_unescaped_description(tmp_path: Path) -> None:
    """143 public files write `\\n` in a one-line description; it is a line break, not text."""
    folder = tmp_path / ".claude" / "agents"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "agents" / "newline-plain.md", folder / "newline-plain.md")
    script = write_script(tmp_path, [{"agent_type": "main", "turns": [{"text": "done"}]}])
    run = run_script(script, tmp_path, env={"HOME": str(tmp_path / "home")})
    assert run.code == 0, run.stderr
    [request] = recorded(tmp_path)
    seen = [s for s in _strings(request) if "Use for reviews." in s]
    assert seen, "the definition reached the model"
    # The catalog gives each type one line, so the unescaped breaks show as spaces there;
    # before, the model read a backslash and an n.
    assert all(
        "- newline-plain: Use for reviews. Examples: - a diff (tools: Read)" in s for s in seen
    )
    assert not any("\\n" in s for s in seen), seen


def test_default_mode_auto_runs_and_behaves_as_default(tmp_path: Path) -> None:
    """No classifier is built here: a call that needs approval is asked, denied headless."""
    write = tool_call("Write", file_path=str(tmp_path / "a.txt"), content="x")
    script = write_script(
        tmp_path,
        [{"agent_type": "main", "turns": [{"tool_calls": [write]}, {"text": "{{tool_results}}"}]}],
    )
    env = {"HOME": str(tmp_path / "home")}
    settings = FIXTURES / "settings" / "default-mode-auto.json"
    auto = run_script(script, tmp_path, "--settings", str(settings), env=env)
    assert auto.code == 0, auto.stderr
    assert not (tmp_path / "a.txt").exists()
    default = run_script(script, tmp_path, "--permission-mode", "default", env=env)
    assert auto.json()["result"] == default.json()["result"]
    assert "needs approval" in auto.json()["result"]
    [warning] = auto.json()["warnings"]
    assert "behaves as 'default'" in warning


async def test_a_library_session_hands_every_warning_to_its_caller(tmp_path: Path) -> None:
    """The Session API: `Session.warnings` from construction on, then `system`/`warning`
    events right after `init`, then the result payload's `warnings`."""
    folder = tmp_path / ".claude" / "agents"
    folder.mkdir(parents=True)
    (folder / "odd.md").write_text("---\nname: odd\ndescription: d\nmaxTurns: 0\n---\nbody\n")
    script = {"agents": [{"agent_type": "main", "turns": [{"text": "done"}]}]}
    options = SessionOptions(
        model=ScriptedModel.from_dict(script),
        cwd=tmp_path,
        home=tmp_path / "home",
        settings_file=WARNED,
    )
    session = Session(options)
    expected = [*SETTINGS["unsupported-events.json"]["warn"], "maxTurns: 0 is not a positive"]
    assert len(session.warnings) == len(expected)
    for want in expected:
        assert any(want in warning for warning in session.warnings), want
    events: list[Event] = []
    result = await session.run("go", on_event=events.append)
    assert isinstance(events[0], InitEvent)
    shown = [e for e in events[1 : 1 + len(expected)] if isinstance(e, SystemEvent)]
    assert [e.data["message"] for e in shown if e.subtype == "warning"] == session.warnings
    assert result.payload["warnings"] == session.warnings


async def test_a_caller_that_wants_only_warnings_gets_each_once_in_order(tmp_path: Path) -> None:
    """`run(on_warning=)` without `on_event` (the CLI's json output): the warnings from before
    the run, then one raised during it, each once, as `Session.warnings` and the payload hold
    them; the same session run with events shows the same texts as `system` events."""
    folder = tmp_path / ".claude" / "agents"
    folder.mkdir(parents=True)
    (folder / "odd.md").write_text("---\nname: odd\ndescription: d\nmaxTurns: 0\n---\nbody\n")
    sessions: list[Session] = []

    @tool(read_only=True)
    async def complain(ctx: ToolContext) -> str:
        """Raise a warning."""
        sessions[0].warn("raised during the run")
        sessions[0].warn("raised during the run")
        return "ok"

    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [{"tool_calls": [{"name": "complain", "input": {}}]}, {"text": "done"}],
            }
        ]
    }

    def options() -> SessionOptions:
        return SessionOptions(
            model=ScriptedModel.from_dict(script),
            cwd=tmp_path,
            home=tmp_path / "home",
            settings_file=WARNED,
            extra_tools=[complain],
        )

    sessions.append(Session(options()))
    before = list(sessions[0].warnings)
    assert before
    heard: list[str] = []
    result = await sessions[0].run("go", on_warning=heard.append)
    assert heard == [*before, "raised during the run"] == sessions[0].warnings
    assert result.payload["warnings"] == heard
    sessions[0] = Session(options())
    events: list[Event] = []
    await sessions[0].run("go", on_event=events.append)
    shown = [
        e.data["message"] for e in events if isinstance(e, SystemEvent) and e.subtype == "warning"
    ]
    assert [m for m in shown if m in heard] == heard


def test_settings_env_reaches_every_command_but_not_what_rewrites_bash(tmp_path: Path) -> None:
    """Claude Code applies settings `env` to every session; here Bash sees it, in children
    too, while BASH_ENV and exported functions (they would run behind the check) are left out."""
    (tmp_path / "evil.sh").write_text("echo startup-file-ran\n")
    settings = tmp_path / "settings.json"
    data = json.loads((FIXTURES / "settings" / "env.json").read_text())
    data["env"]["BASH_ENV"] = str(tmp_path / "evil.sh")
    settings.write_text(json.dumps(data))
    show = 'echo "$GREETING|$RETRIES|$VERBOSE"; type -t ls'
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [tool_call("Bash", command=show)]},
                    {"tool_calls": [agent_call("p", "general-purpose")]},
                    {"text": "{{tool_results}}"},
                ],
            },
            {
                "agent_type": "general-purpose",
                "turns": [
                    {"tool_calls": [tool_call("Bash", command='echo "child: $GREETING"')]},
                    {"text": "{{tool_results}}"},
                ],
            },
        ],
    )
    run = run_script(
        script,
        tmp_path,
        "--settings",
        str(settings),
        "--permission-mode",
        "bypassPermissions",
        env={"HOME": str(tmp_path / "home")},
    )
    assert run.code == 0, run.stderr
    assert "child: hello from settings" in run.json()["result"]
    first = [s for s in _strings(recorded(tmp_path)[1]) if "hello from settings" in s]
    assert first and "hello from settings|3|true\nfile" in first[0], first
    assert not any("startup-file-ran" in s for r in recorded(tmp_path) for s in _strings(r))
    assert len(run.json()["warnings"]) == 4
