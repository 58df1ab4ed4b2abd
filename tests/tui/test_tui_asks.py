"""The pieces of the permission prompt that need no screen: rule suggestions and the local
settings file "allow always" writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from subagents.events import AgentRef
from subagents.permissions.checker import PermissionRequest
from subagents.tui.asks import suggested_rule
from subagents.tui.commands import parse, prompt_text
from subagents.tui.local_settings import LocalSettingsError, add_allow_rule

MAIN = AgentRef(agent_id="s", agent_type="main")


def _bash(command: str) -> PermissionRequest:
    return PermissionRequest(
        tool_name="Bash", input={"command": command}, agent=MAIN, subject=command, reason=""
    )


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("git push origin main", "Bash(git push:*)"),
        ("npm test", "Bash(npm test:*)"),
        ("touch f0.txt", "Bash(touch:*)"),
        ("ls -la", "Bash(ls:*)"),
        ("make", "Bash(make:*)"),
        ("rm -rf build && git push", "Bash(rm -rf build && git push)"),
        ("echo $(cat secret)", "Bash(echo $(cat secret))"),
        ("curl x | sh", "Bash(curl x | sh)"),
    ],
)
def test_the_suggested_rule_is_a_prefix_only_for_a_plain_command(command: str, rule: str) -> None:
    assert suggested_rule(_bash(command)) == rule


def test_other_tools_are_allowed_by_name() -> None:
    request = PermissionRequest(
        tool_name="WebFetch", input={"url": "https://x"}, agent=MAIN, subject="WebFetch", reason=""
    )
    assert suggested_rule(request) == "WebFetch"


def test_allow_always_adds_to_the_local_settings_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.local.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"permissions": {"deny": ["Bash(rm:*)"]}, "env": {"A": "1"}}))
    add_allow_rule(tmp_path, "Bash(git push:*)")
    add_allow_rule(tmp_path, "Bash(git push:*)")
    data = json.loads(path.read_text())
    assert data == {
        "permissions": {"deny": ["Bash(rm:*)"], "allow": ["Bash(git push:*)"]},
        "env": {"A": "1"},
    }
    assert [p.name for p in path.parent.iterdir()] == ["settings.local.json"], "no temp left"


@pytest.mark.parametrize(
    "content", ["{not json", "[1, 2]", '{"permissions": []}', '{"permissions": {"allow": "x"}}']
)
def test_a_broken_local_settings_file_is_reported_and_left_alone(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / ".claude" / "settings.local.json"
    path.parent.mkdir()
    path.write_text(content)
    with pytest.raises(LocalSettingsError, match=r"settings\.local\.json"):
        add_allow_rule(tmp_path, "Read")
    assert path.read_text() == content


def test_a_fifo_or_a_symlink_at_the_path_is_not_written_through(tmp_path: Path) -> None:
    folder = tmp_path / ".claude"
    folder.mkdir()
    os.mkfifo(folder / "settings.local.json")
    with pytest.raises(LocalSettingsError, match="not a regular file"):
        add_allow_rule(tmp_path, "Read")  # and it did not hang on the FIFO
    (folder / "settings.local.json").unlink()
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    (folder / "settings.local.json").symlink_to(target)
    with pytest.raises(LocalSettingsError, match="symlink"):
        add_allow_rule(tmp_path, "Read")
    assert target.read_text() == "{}", "the symlink's target is untouched"
    assert (folder / "settings.local.json").is_symlink()


def test_slash_commands_and_prompts_are_told_apart() -> None:
    assert parse("/stop a1b2") == ("stop", "a1b2")
    assert parse("  /HELP ") == ("help", "")
    assert parse("fix /etc/hosts") is None
    assert parse("//not a command") is None
    assert prompt_text("//not a command") == "/not a command"
