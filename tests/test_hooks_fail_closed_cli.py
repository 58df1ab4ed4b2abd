"""Hooks fail closed and rule typos are said out loud, through the CLI (issue 13 item 5).

Before: one invalid field in a hook's JSON dropped the whole output (a valid ``decision: block``
with it) and the tool ran; a PreToolUse hook printing what cannot be read let the call through;
``bash(rm:*)``, ``BASH(rm:*)`` and ``Bash(rm:*))`` were accepted without a word and never
matched. Each case here runs the real command on a scripted model and reads what it printed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_helpers import CliRun, run_script, tool_call, write_script


def _hook_settings(tmp_path: Path, printed: str) -> Path:
    """Settings whose PreToolUse hook on Bash prints ``printed`` on stdout and exits 0."""
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ncat > /dev/null\nprintf '%s' '{printed}'\n")
    hook.chmod(0o755)
    settings = {
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": str(hook)}]}
            ]
        }
    }
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings))
    return path


def _touch_run(tmp_path: Path, *extra: str) -> CliRun:
    """The main agent asks Bash to create ``ran.txt`` and answers with the tool result."""
    turns: list[dict[str, Any]] = [
        {"tool_calls": [tool_call("Bash", command="touch ran.txt")]},
        {"text": "{{tool_results}}"},
    ]
    script = write_script(tmp_path, [{"agent_type": "main", "turns": turns}])
    env = {"HOME": str(tmp_path / "home")}
    return run_script(script, tmp_path, "--permission-mode", "bypassPermissions", *extra, env=env)


def test_one_invalid_field_does_not_drop_a_valid_block(tmp_path: Path) -> None:
    printed = json.dumps(
        {
            "decision": "block",
            "reason": "the tree is frozen",
            "hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "Deny"},
        }
    )
    run = _touch_run(tmp_path, "--settings", str(_hook_settings(tmp_path, printed)))
    assert run.code == 0, run.stderr
    result = run.json()
    assert "the tree is frozen" in result["result"]
    assert not (tmp_path / "ran.txt").exists(), "the blocked call ran"
    assert any(
        "hookSpecificOutput.permissionDecision: 'Deny' is not one of" in w
        for w in result["warnings"]
    ), result["warnings"]


def test_pre_tool_use_output_that_cannot_be_understood_blocks_the_call(tmp_path: Path) -> None:
    settings = _hook_settings(tmp_path, '{"decision": "blocked"')
    run = _touch_run(tmp_path, "--settings", str(settings))
    assert run.code == 0, run.stderr
    result = run.json()["result"]
    assert "cannot be understood" in result and "invalid JSON" in result, result
    assert str(tmp_path / "hook.sh") in result, "the message names the hook"
    assert not (tmp_path / "ran.txt").exists()


def test_a_valid_allow_still_lets_the_call_run(tmp_path: Path) -> None:
    """The control: fail-closed reading does not block what a hook plainly allows."""
    printed = json.dumps(
        {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}
    )
    run = _touch_run(tmp_path, "--settings", str(_hook_settings(tmp_path, printed)))
    assert run.code == 0, run.stderr
    assert (tmp_path / "ran.txt").exists()
    assert run.json()["warnings"] == []


def test_misspelt_deny_rules_are_warnings_naming_the_rule_and_the_good_ones_hold(
    tmp_path: Path,
) -> None:
    settings = tmp_path / "settings.json"
    deny = ["bash(rm:*)", "BASH(rm:*)", "Bash(rm:*))", "Bash(touch:*)"]
    settings.write_text(json.dumps({"permissions": {"deny": deny}}))
    run = _touch_run(tmp_path, "--settings", str(settings))
    assert run.code == 0, run.stderr
    result = run.json()
    assert not (tmp_path / "ran.txt").exists(), "the valid deny rule beside the typos holds"
    assert "denied" in result["result"]
    warnings = result["warnings"]
    assert len(warnings) == 3, warnings
    for rule, warning in zip(deny, warnings, strict=False):
        assert warning.startswith(
            f"{settings}: permissions.deny: invalid permission rule {rule!r} was skipped"
        ), warning
    assert "did you mean 'Bash(rm:*)'?" in warnings[0]
    assert "case-sensitive" in warnings[1]
    assert "unmatched ')'" in warnings[2]
    text = [line for line in run.stderr.splitlines() if line.startswith("subagents: warning: ")]
    assert len(text) == 3, run.stderr


def test_frontmatter_hook_if_runs_only_for_matching_calls(tmp_path: Path) -> None:
    """A definition's own PreToolUse hook with ``if`` (no settings hook anywhere)."""
    folder = tmp_path / ".claude" / "agents"
    folder.mkdir(parents=True)
    (folder / "pusher.md").write_text(
        "---\nname: pusher\ndescription: d\ntools: Bash\nhooks:\n  PreToolUse:\n"
        "    - matcher: Bash\n      hooks:\n        - type: command\n"
        "          if: Bash(git push *)\n"
        "          command: echo 'no pushes from here' >&2; exit 2\n---\nbody\n"
    )
    calls = [
        tool_call("Bash", command="echo plain-call-ran"),
        tool_call("Bash", command="git push origin main"),
    ]
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {
                        "tool_calls": [
                            tool_call("Agent", description="d", prompt="p", subagent_type="pusher")
                        ]
                    },
                    {"text": "{{tool_results}}"},
                ],
            },
            {
                "agent_type": "pusher",
                "turns": [{"tool_calls": calls}, {"text": "{{tool_results}}"}],
            },
        ],
    )
    env = {"HOME": str(tmp_path / "home")}
    run = run_script(script, tmp_path, "--permission-mode", "bypassPermissions", env=env)
    assert run.code == 0, run.stderr
    result = run.json()["result"]
    assert "plain-call-ran" in result
    assert "no pushes from here" in result
