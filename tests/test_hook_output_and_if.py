"""Hook JSON output read field by field (PreToolUse fails closed), and the handler ``if``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from subagents.hooks import parse_hooks
from subagents.hooks.matchers import ToolCall
from subagents.hooks.output import read_json_output
from subagents.permissions.hook_conditions import PermissionRuleConditions
from test_hooks import EchoTool, Setup, group, prints, run_echo


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


# -- one invalid field does not drop the others ----------------------------------------------


async def test_an_invalid_field_does_not_drop_a_valid_block(setup: Setup) -> None:
    output = {
        "decision": "block",
        "reason": "frozen",
        "hookSpecificOutput": {"permissionDecision": "Deny"},
    }
    engine = setup.engine({"PreToolUse": [group(setup.script("h", prints(output)))]})
    tool = EchoTool()
    content, is_error = await run_echo(setup.ctx(hooks=engine), tool, "hi")
    assert is_error and tool.seen == []
    assert "frozen" in content
    assert any(
        "hookSpecificOutput.permissionDecision: 'Deny' is not one of" in w for w in setup.warnings
    )


@pytest.mark.parametrize(
    ("stdout", "named"),
    [
        ("{not json", "invalid JSON"),
        (
            '{"hookSpecificOutput": {"permissionDecision": "Allow"}}',
            "hookSpecificOutput.permissionDecision",
        ),
        ('{"decision": "blocked"}', "invalid decision"),
        ('{"continue": "false"}', "invalid continue"),
        ('{"hookSpecificOutput": {"updatedInput": "text"}}', "hookSpecificOutput.updatedInput"),
        ('{"hookSpecificOutput": ["x"]}', "invalid hookSpecificOutput"),
        ('{"a": ' + "[" * 100 + "]" * 100 + "}", "nested deeper"),
    ],
)
async def test_pre_tool_use_output_that_cannot_be_understood_blocks(
    setup: Setup, stdout: str, named: str
) -> None:
    script = setup.script("h", f"cat > /dev/null; printf '%s' '{stdout}'")
    engine = setup.engine({"PreToolUse": [group(script)]})
    tool = EchoTool()
    content, is_error = await run_echo(setup.ctx(hooks=engine), tool, "hi")
    assert is_error and tool.seen == [], "fail closed: the tool did not run"
    assert "cannot be understood" in content and named in content
    assert script in content, "the message names the hook"


async def test_elsewhere_bad_output_is_a_warning_and_valid_fields_still_apply(setup: Setup) -> None:
    output = {"decision": "Block", "hookSpecificOutput": {"additionalContext": "lint: 2 issues"}}
    engine = setup.engine({"PostToolUse": [group(setup.script("h", prints(output)))]})
    tool = EchoTool()
    content, is_error = await run_echo(setup.ctx(hooks=engine), tool, "hi")
    assert not is_error and tool.seen == ["hi"]
    assert "lint: 2 issues" in content
    assert any("decision: 'Block' is not one of block, approve" in w for w in setup.warnings)


def test_read_json_output_reads_each_field_on_its_own() -> None:
    parsed = read_json_output(
        {
            "continue": True,
            "systemMessage": 3,
            "reason": "r",
            "hookSpecificOutput": {
                "additionalContext": "c",
                "permissionDecision": "ask",
                "updatedInput": {"a": 1},
            },
        }
    )
    assert (parsed.reason, parsed.additional_context, parsed.permission_decision) == (
        "r",
        "c",
        "ask",
    )
    assert parsed.updated_input == {"a": 1}
    assert parsed.problems == ["systemMessage: expected text, got 3"]
    assert parsed.decisive == []


# -- the handler `if` -------------------------------------------------------------------------


def _ran(
    rule: str, tool: str, tool_input: dict[str, Any], tmp_path: Path, event: str = "PreToolUse"
) -> bool:
    config = parse_hooks(
        {event: [{"matcher": "*", "hooks": [{"type": "command", "command": "x", "if": rule}]}]}, "s"
    )
    call = ToolCall(
        tool_name=tool,
        tool_input=tool_input,
        cwd=tmp_path,
        project_root=tmp_path,
        home=tmp_path,
        conditions=PermissionRuleConditions(),
    )
    return bool(config.commands_for(event, tool, call))


@pytest.mark.parametrize(
    ("rule", "command", "runs"),
    [
        # Claude Code's documented Bash matching table.
        ("Bash(git *)", "FOO=bar git push", True),
        ("Bash(git *)", "npm test && git push", True),
        ("Bash(rm *)", "echo $(rm -rf /)", True),
        ("Bash(rm *)", "echo $(date)", False),
        ("Bash(cat *)", "echo before $(date) after", False),
        ("Bash(git *)", "$TOOL git push", True),
        ("Bash(git push *)", "echo $(date)", True),
        # And the force-push blocker of the issue.
        ("Bash(git push *--force*)", "git push --force origin main", True),
        ("Bash(git push *--force*)", "git push origin main", False),
        ("Bash(git push *--force*)", "ls -la", False),
        ("Bash(git push *--force*)", 'echo "unterminated', True),  # cannot be read: runs
        ("Bash", "anything at all", True),
        ("Bash(git:*)", "git status", True),
    ],
)
def test_if_follows_claude_codes_bash_table(
    rule: str, command: str, runs: bool, tmp_path: Path
) -> None:
    assert _ran(rule, "Bash", {"command": command}, tmp_path) is runs


def test_if_on_file_tools_and_other_tools(tmp_path: Path) -> None:
    assert _ran("Edit(*.ts)", "Edit", {"file_path": str(tmp_path / "a.ts")}, tmp_path)
    assert not _ran("Edit(*.ts)", "Edit", {"file_path": str(tmp_path / "a.py")}, tmp_path)
    # One `if` rule matches one tool's calls: Edit(...) is not Write.
    assert not _ran("Edit(*.ts)", "Write", {"file_path": str(tmp_path / "a.ts")}, tmp_path)
    assert _ran("Agent(Explore)", "Task", {"subagent_type": "Explore"}, tmp_path)
    assert not _ran("Agent(Explore)", "Agent", {"subagent_type": "Plan"}, tmp_path)
    assert not _ran("Bash(git *)", "Read", {"file_path": "x"}, tmp_path)
    assert _ran("mcp__github", "mcp__github__list", {}, tmp_path)


def test_if_runs_only_on_tool_events_and_fails_open_on_a_non_rule(tmp_path: Path) -> None:
    stop = parse_hooks(
        {"Stop": [{"hooks": [{"type": "command", "command": "x", "if": "Bash"}]}]}, "s"
    )
    assert stop.commands_for("Stop", None) == []
    assert "never runs" in stop.warnings[0]
    assert _ran("not a rule (((", "Bash", {"command": "ls"}, tmp_path)
    assert _ran("Bash(", "Bash", {"command": "ls"}, tmp_path)  # parses as a shape, not a rule
