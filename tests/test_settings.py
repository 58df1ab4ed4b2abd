"""Settings files: merge order, merge rules, and errors that name the file, line and field."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from subagents.hooks.config import HookConfigError, config_from_settings
from subagents.permissions import context_from_settings
from subagents.settings import SettingsError, load_settings, settings_paths


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    home = tmp_path / "home"
    project = tmp_path / "repo"
    sub_home = tmp_path / "subagents-home"
    for path in (home, project, sub_home):
        path.mkdir()
    return {"home": home, "project": project, "sub_home": sub_home, "tmp": tmp_path}


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def load(dirs: dict[str, Path], **kwargs: Any) -> Any:
    return load_settings(
        cwd=dirs["project"], home=dirs["home"], subagents_home=dirs["sub_home"], **kwargs
    )


def test_no_files_gives_empty_settings(dirs: dict[str, Path]) -> None:
    settings = load(dirs)
    assert settings.sources == []
    assert settings.allow == settings.deny == settings.ask == []
    assert settings.default_mode is None
    assert settings.hooks == {}


def test_merge_order_and_rule_concatenation(dirs: dict[str, Path]) -> None:
    home, project = dirs["home"], dirs["project"]
    user = write(
        home / ".claude/settings.json",
        {"permissions": {"deny": ["Bash(rm:*)"], "allow": ["Read"], "defaultMode": "plan"}},
    )
    sub_user = write(dirs["sub_home"] / "settings.json", {"permissions": {"allow": ["Glob"]}})
    shared = write(
        project / ".claude/settings.json",
        {"permissions": {"allow": ["Read", "Bash(ls:*)"], "defaultMode": "acceptEdits"}},
    )
    local = write(project / ".claude/settings.local.json", {"permissions": {"ask": ["Write"]}})
    ours = write(project / ".subagents/settings.json", {"permissions": {"deny": ["Edit"]}})
    extra = write(dirs["tmp"] / "cli.json", {"permissions": {"defaultMode": "dontAsk"}})

    settings = load(dirs, extra_file=extra)

    assert settings.sources == [user, sub_user, shared, local, ours, extra]
    assert [(r.rule, r.source) for r in settings.allow] == [
        ("Read", user),  # the duplicate from the project file is dropped, first source kept
        ("Glob", sub_user),
        ("Bash(ls:*)", shared),
    ]
    assert [r.rule for r in settings.deny] == ["Bash(rm:*)", "Edit"]
    assert [r.rule for r in settings.ask] == ["Write"]
    assert settings.default_mode == "dontAsk"  # the --settings file is last, so it wins
    assert settings.default_mode_source == extra


def test_later_file_wins_scalar_but_cannot_remove_a_deny(dirs: dict[str, Path]) -> None:
    write(
        dirs["home"] / ".claude/settings.json",
        {"permissions": {"deny": ["Bash(curl:*)"], "defaultMode": "plan"}, "model": "opus"},
    )
    write(
        dirs["project"] / ".claude/settings.json",
        {"permissions": {"deny": [], "defaultMode": "default"}, "model": "haiku"},
    )
    settings = load(dirs)
    assert [r.rule for r in settings.deny] == ["Bash(curl:*)"]
    assert settings.default_mode == "default"
    assert settings.values["model"] == "haiku"


def test_untrusted_workspace_skips_project_files(dirs: dict[str, Path]) -> None:
    write(dirs["home"] / ".claude/settings.json", {"permissions": {"deny": ["Bash"]}})
    write(dirs["project"] / ".claude/settings.json", {"permissions": {"allow": ["Bash"]}})
    settings = load(dirs, trusted=False)
    assert [r.rule for r in settings.deny] == ["Bash"]
    assert settings.allow == []


def test_hooks_concatenate_matcher_groups_per_event(dirs: dict[str, Path]) -> None:
    group_a = {"matcher": "Bash", "hooks": [{"type": "command", "command": "a.sh"}]}
    group_b = {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "b.sh"}]}
    group_c = {"hooks": [{"type": "command", "command": "c.sh", "timeout": 5}]}
    write(dirs["home"] / ".claude/settings.json", {"hooks": {"PreToolUse": [group_a]}})
    write(
        dirs["project"] / ".claude/settings.json",
        {"hooks": {"PreToolUse": [group_b], "Stop": [group_c]}},
    )
    settings = load(dirs)
    assert settings.hooks == {"PreToolUse": [group_a, group_b], "Stop": [group_c]}


def test_other_keys_merge_objects_per_key(dirs: dict[str, Path]) -> None:
    write(dirs["home"] / ".claude/settings.json", {"mcpServers": {"a": {}, "b": {"x": 1}}})
    write(dirs["project"] / ".claude/settings.json", {"mcpServers": {"b": {"x": 2}}})
    assert load(dirs).values["mcpServers"] == {"a": {}, "b": {"x": 2}}


def test_env_merges_per_name_later_file_wins(dirs: dict[str, Path]) -> None:
    write(dirs["home"] / ".claude/settings.json", {"env": {"A": "1", "B": "1"}})
    write(dirs["project"] / ".claude/settings.json", {"env": {"B": 2, "C": "\ud800"}})
    settings = load(dirs)
    assert settings.env == {"A": "1", "B": "2"}
    assert "env" not in settings.values
    [warning] = settings.warnings
    assert "env['C']: not a usable environment variable" in warning


def test_additional_directories_resolved_and_deduplicated(dirs: dict[str, Path]) -> None:
    write(
        dirs["project"] / ".claude/settings.json",
        {"permissions": {"additionalDirectories": ["../shared", "~/notes"]}},
    )
    write(
        dirs["project"] / ".subagents/settings.json",
        {"permissions": {"additionalDirectories": [str(dirs["tmp"] / "shared")]}},
    )
    settings = load(dirs)
    assert settings.additional_directories == [
        (dirs["tmp"] / "shared").resolve(),
        (dirs["home"] / "notes").resolve(),
    ]


def test_home_as_project_dir_is_read_once(dirs: dict[str, Path]) -> None:
    write(dirs["home"] / ".claude/settings.json", {"permissions": {"deny": ["Bash"]}})
    paths = settings_paths(cwd=dirs["home"], home=dirs["home"], subagents_home=dirs["sub_home"])
    assert paths.count(dirs["home"] / ".claude/settings.json") == 1


def test_invalid_json_names_file_line_and_column(dirs: dict[str, Path]) -> None:
    bad = write(
        dirs["project"] / ".claude/settings.json",
        '{\n  "permissions": {\n    "deny": ["Bash(rm:*)"]\n    "allow": []\n  }\n}\n',
    )
    with pytest.raises(SettingsError) as info:
        load(dirs)
    assert str(info.value) == f"{bad}:4:5: invalid JSON: Expecting ',' delimiter"


def test_invalid_user_file_refuses_rather_than_dropping_denies(dirs: dict[str, Path]) -> None:
    bad = write(dirs["home"] / ".claude/settings.json", '{"permissions": {"deny": ["Bash"],}}')
    with pytest.raises(SettingsError, match=rf"^{bad}:1:35: invalid JSON"):
        load(dirs)


def test_a_deny_list_of_the_wrong_shape_refuses_to_start(dirs: dict[str, Path]) -> None:
    # Dropping it would run without the user's deny rule: fatal, naming the field.
    bad = write(dirs["project"] / ".claude/settings.local.json", {"permissions": {"deny": "Bash"}})
    with pytest.raises(SettingsError, match=rf"^{bad}: permissions\.deny: must be a list"):
        load(dirs)
    write(bad, {"permissions": {"ask": ["Read", 3]}})
    with pytest.raises(SettingsError, match=rf"^{bad}: permissions\.ask: must be a list"):
        load(dirs)


def test_allow_entries_of_the_wrong_shape_are_warned_and_dropped(dirs: dict[str, Path]) -> None:
    # Dropping an allow only narrows the run: a warning naming the field, the rest loads.
    bad = write(
        dirs["project"] / ".claude/settings.local.json",
        {"permissions": {"allow": ["Read", 3], "additionalDirectories": "/tmp"}},
    )
    settings = load(dirs)
    assert [rule.rule for rule in settings.allow] == ["Read"]
    assert settings.additional_directories == []
    assert settings.warnings == [
        f"{bad}: permissions.allow: entries that are not strings were ignored",
        f"{bad}: permissions.additionalDirectories: must be a list of strings; ignored",
    ]


def test_unknown_mode_is_an_error(dirs: dict[str, Path]) -> None:
    write(dirs["project"] / ".claude/settings.json", {"permissions": {"defaultMode": "yolo"}})
    with pytest.raises(SettingsError, match=r"permissions\.defaultMode"):
        load(dirs)


def test_hooks_of_wrong_shape_name_the_file_and_the_event(dirs: dict[str, Path]) -> None:
    user = write(dirs["home"] / ".claude/settings.json", {"hooks": {"Stop": [{"hooks": []}]}})
    bad = write(dirs["project"] / ".claude/settings.json", {"hooks": {"PreToolUse": {"x": 1}}})
    settings = load(dirs)
    assert [path for path, _ in settings.hook_blocks] == [user, bad]
    with pytest.raises(HookConfigError, match=rf"^{bad}: hooks\.PreToolUse: expected a list"):
        config_from_settings(settings)


def test_unknown_permission_keys_are_kept(dirs: dict[str, Path]) -> None:
    write(
        dirs["project"] / ".claude/settings.json",
        {"permissions": {"disableBypassPermissionsMode": "disable"}},
    )
    assert load(dirs).permissions_extra == {"disableBypassPermissionsMode": "disable"}


def test_top_level_must_be_an_object(dirs: dict[str, Path]) -> None:
    bad = write(dirs["project"] / ".claude/settings.json", "[1, 2]")
    with pytest.raises(SettingsError, match=rf"^{bad}: settings must be a JSON object"):
        load(dirs)


def test_directory_in_place_of_file_is_skipped_with_a_warning(dirs: dict[str, Path]) -> None:
    path = dirs["project"] / ".claude/settings.json"
    path.mkdir(parents=True)
    settings = load(dirs)
    assert settings.sources == []
    assert settings.warnings == [
        f"{path}: is a directory, not a regular file; skipped, not read as a settings file"
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_is_an_error(dirs: dict[str, Path]) -> None:
    path = write(dirs["project"] / ".claude/settings.json", {})
    path.chmod(0)
    try:
        with pytest.raises(SettingsError, match=rf"^{path}: cannot open"):
            load(dirs)
    finally:
        path.chmod(0o644)


def test_missing_settings_flag_file_is_an_error(dirs: dict[str, Path]) -> None:
    missing = dirs["tmp"] / "nope.json"
    with pytest.raises(SettingsError, match=rf"^{missing}: .*does not exist"):
        load(dirs, extra_file=missing)


def test_empty_file_holds_no_settings(dirs: dict[str, Path]) -> None:
    path = write(dirs["project"] / ".claude/settings.json", "  \n")
    assert load(dirs).sources == [path]


def test_bad_rule_text_is_a_warning_naming_its_file(dirs: dict[str, Path]) -> None:
    rules = {"permissions": {"deny": ["Bash(", "Bash(rm:*)"]}}
    path = write(dirs["project"] / ".claude/settings.json", rules)
    warnings: list[str] = []
    context = context_from_settings(load(dirs), cwd=dirs["project"], on_warning=warnings.append)
    assert [str(r) for r in context.deny] == ["Bash(rm:*)"]  # the other rules still hold
    (warning,) = warnings
    assert warning.startswith(f"{path}: permissions.deny: invalid permission rule 'Bash('")


def test_context_from_settings_keeps_sources_and_mode(dirs: dict[str, Path]) -> None:
    path = write(
        dirs["project"] / ".claude/settings.json",
        {"permissions": {"deny": ["Agent(Explore)"], "defaultMode": "plan"}},
    )
    settings = load(dirs)
    context = context_from_settings(settings, cwd=dirs["project"], home=dirs["home"])
    assert context.mode == "plan"
    assert context.deny[0].source == str(path)
    assert context_from_settings(settings, cwd=dirs["project"], mode="default").mode == "default"
    assert context.agent_type_denial("Explore") == (
        f"Agent type 'Explore' has been denied by permission rule 'Agent(Explore)' from {path}"
    )
    assert context.agent_type_denial("Plan") is None


def test_symlink_loop_is_an_error_not_a_missing_file(dirs: dict[str, Path]) -> None:
    path = dirs["project"] / ".claude/settings.json"
    path.parent.mkdir()
    path.symlink_to(path)
    with pytest.raises(SettingsError, match=rf"^{path}: cannot open: Too many levels"):
        load(dirs)


def test_subagents_home_with_a_tilde_means_the_same_folder_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SUBAGENTS_HOME=~/x``: the store, the definitions and the settings all read ``$HOME/x``
    (one rule, ``state.subagents_home``), not a literal folder named ``~``."""
    from subagents.agents.definitions import load_definitions
    from subagents.state import ProjectState

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SUBAGENTS_HOME", "~/sa-home")
    folder = tmp_path / "sa-home"
    (folder / "agents").mkdir(parents=True)
    (folder / "agents" / "helper.md").write_text("---\nname: helper\ndescription: d\n---\nbody")
    (folder / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Bash"]}}))
    project = tmp_path / "project"
    project.mkdir()
    assert ProjectState.for_cwd(project).home == folder
    assert folder / "settings.json" in settings_paths(cwd=project, home=tmp_path)
    assert [r.rule for r in load_settings(cwd=project, home=tmp_path).deny] == ["Bash"]
    assert "helper" in load_definitions(cwd=project, home=tmp_path).names()
