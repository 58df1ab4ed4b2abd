"""Hook settings parsing and matcher rules (SPEC §12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import run_script, write_script
from subagents.hooks import (
    DEFAULT_TIMEOUT_S,
    HookConfigError,
    compile_matcher,
    parse_hooks,
)

SRC = "/repo/.claude/settings.json"


def cmd(command: str, **extra: object) -> dict[str, object]:
    return {"type": "command", "command": command, **extra}


# -- matchers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [None, "", "*", "  "])
def test_match_all_forms(text: str | None) -> None:
    matcher = compile_matcher(text)
    assert matcher.matches("Bash")
    assert matcher.matches("mcp__server__tool")


def test_exact_list_splits_on_pipe_and_comma_and_trims() -> None:
    matcher = compile_matcher("Edit | Write, MultiEdit")
    assert matcher.names == frozenset({"Edit", "Write", "MultiEdit"})
    assert matcher.matches("Edit")
    assert matcher.matches("Write")
    assert matcher.matches("MultiEdit")
    # Exact, not a substring test: NotebookEdit is not Edit.
    assert not matcher.matches("NotebookEdit")
    assert not matcher.matches("Edi")


def test_single_name_is_exact() -> None:
    matcher = compile_matcher("Bash")
    assert matcher.matches("Bash")
    assert not matcher.matches("BashOutput")


def test_names_with_dash_and_underscore_are_an_exact_list() -> None:
    matcher = compile_matcher("general-purpose|my_agent")
    assert matcher.pattern is None
    assert matcher.matches("general-purpose")
    assert matcher.matches("my_agent")
    assert not matcher.matches("general")


def test_regex_is_searched_unanchored_like_claude_code() -> None:
    matcher = compile_matcher("mcp__.*")
    assert matcher.pattern is not None
    assert matcher.matches("mcp__github__list")
    assert not matcher.matches("Bash")
    anchored = compile_matcher("^Notebook.*$")
    assert anchored.matches("NotebookEdit")
    assert not anchored.matches("MyNotebookEdit")
    assert compile_matcher("Edit.*").matches("NotebookEdit")  # unanchored search


def test_events_without_subject_ignore_matchers() -> None:
    assert compile_matcher("Bash").matches(None)


def test_invalid_regex_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match=r"invalid regular expression 'Bash\('"):
        compile_matcher("Bash(")


# -- parse_hooks -------------------------------------------------------------------------------


def test_parse_valid_block_with_defaults() -> None:
    config = parse_hooks(
        {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [cmd("a.sh", timeout=5), cmd("b.sh")]},
            ],
            "SessionEnd": [{"hooks": [cmd("end.sh")]}],
        },
        SRC,
    )
    assert config.warnings == ()
    bash = config.commands_for("PreToolUse", "Bash")
    assert [(c.command, c.timeout, c.source) for c in bash] == [
        ("a.sh", 5.0, SRC),
        ("b.sh", DEFAULT_TIMEOUT_S, SRC),
    ]
    assert config.commands_for("PreToolUse", "Read") == []
    assert [c.command for c in config.commands_for("SessionEnd", None)] == ["end.sh"]


def test_missing_command_names_file_and_path() -> None:
    raw = {"PreToolUse": [{"matcher": "Bash", "hooks": [cmd("ok.sh"), {"type": "command"}]}]}
    with pytest.raises(HookConfigError) as info:
        parse_hooks(raw, SRC)
    assert str(info.value) == (
        f"{SRC}: hooks.PreToolUse[0].hooks[1].command: field required: the command line to run"
    )


def test_malformed_hooks_of_events_we_run_name_the_json_path() -> None:
    with pytest.raises(HookConfigError, match=rf"^{SRC}: hooks\.Stop\[1\]\.hooks: "):
        parse_hooks({"Stop": [{"hooks": [cmd("a")]}, {"matcher": "x"}]}, SRC)
    with pytest.raises(HookConfigError, match=r"hooks\.Stop: expected a list"):
        parse_hooks({"Stop": {"hooks": []}}, SRC)
    with pytest.raises(HookConfigError, match=r"hooks\.Stop\[0\]\.hooks\[0\]\.command: "):
        parse_hooks({"Stop": [{"hooks": [{"type": "command", "command": 3}]}]}, SRC)
    with pytest.raises(HookConfigError, match=r"hooks\.Stop\[0\]\.hooks\[0\]\.type: "):
        parse_hooks({"Stop": [{"hooks": [{"command": "x"}]}]}, SRC)
    with pytest.raises(HookConfigError, match=r"hooks\.Stop\[0\]\.matcher: must be text"):
        parse_hooks({"Stop": [{"matcher": {"tool": "Bash"}, "hooks": [cmd("x")]}]}, SRC)


def test_a_bad_timeout_is_a_warning_and_the_default_applies() -> None:
    config = parse_hooks({"Stop": [{"hooks": [cmd("a", timeout=0), cmd("b", timeout="30")]}]}, SRC)
    a, b = config.commands_for("Stop", None)
    assert (a.timeout, b.timeout) == (DEFAULT_TIMEOUT_S, 30.0)
    assert config.warnings == (
        f"{SRC}: hooks.Stop[0].hooks[0].timeout: 0 is not a positive number of seconds; "
        "the default 600 s is used",
    )


def test_bad_regex_matcher_names_the_path() -> None:
    with pytest.raises(HookConfigError) as info:
        parse_hooks({"PostToolUse": [{"matcher": "Write(", "hooks": [cmd("x")]}]}, SRC)
    message = str(info.value)
    assert message.startswith(f"{SRC}: hooks.PostToolUse[0].matcher: invalid regular expression")
    assert "'Write('" in message


def test_other_hook_types_are_skipped_with_a_warning() -> None:
    config = parse_hooks(
        {
            "Stop": [
                {
                    "hooks": [
                        {"type": "prompt", "prompt": "ok?"},
                        {"type": "shell", "command": "x"},
                        cmd("s"),
                    ]
                }
            ]
        },
        SRC,
    )
    assert [c.command for c in config.commands_for("Stop", None)] == ["s"]
    assert config.warnings == (
        f"{SRC}: hooks.Stop[0].hooks[0].type: hook type 'prompt' is not supported here; "
        "this hook is ignored",
        f"{SRC}: hooks.Stop[0].hooks[1].type: hook type 'shell' is unknown; this hook is ignored",
    )


def test_events_we_do_not_fire_are_warnings_whatever_their_shape() -> None:
    config = parse_hooks(
        {
            "Notification": [{"hooks": [cmd("u")]}],
            "user-prompt-submit-hook": "x.sh",
            "preToolUse": 3,
            "Stop": [{"hooks": [cmd("s")]}],
        },
        SRC,
    )
    assert set(config.events) == {"Stop"}
    assert config.warnings == (
        f"{SRC}: hooks.Notification: a Claude Code hook event this runtime does not fire; "
        "its hooks are ignored",
        f"{SRC}: hooks.user-prompt-submit-hook: unknown hook event; its hooks are ignored",
        f"{SRC}: hooks.preToolUse: unknown hook event (did you mean 'PreToolUse'?); "
        "its hooks are ignored",
    )


def test_not_an_object_is_an_error() -> None:
    with pytest.raises(HookConfigError, match=rf"^{SRC}: hooks: expected an object"):
        parse_hooks(["Stop"], SRC)  # type: ignore[arg-type]
    assert parse_hooks(None, SRC).events == {}


def test_merged_keeps_every_source_in_order_and_dedupes_identical_commands() -> None:
    user = parse_hooks({"Stop": [{"hooks": [cmd("same.sh"), cmd("user.sh")]}]}, "~/settings")
    project = parse_hooks({"Stop": [{"hooks": [cmd("same.sh"), cmd("proj.sh")]}], "Bogus": []}, SRC)
    merged = user.merged(project)
    commands = merged.commands_for("Stop", None)
    assert [c.command for c in commands] == ["same.sh", "user.sh", "proj.sh"]
    assert [c.source for c in commands] == ["~/settings", "~/settings", SRC]
    assert len(merged.warnings) == 1


def test_frontmatter_stop_becomes_subagent_stop() -> None:
    config = parse_hooks(
        {"Stop": [{"hooks": [cmd("fm-stop")]}], "SubagentStop": [{"hooks": [cmd("fm-sub")]}]},
        "agent.md",
    ).with_stop_as_subagent_stop()
    assert "Stop" not in config.events
    assert [c.command for c in config.commands_for("SubagentStop", "x")] == ["fm-sub", "fm-stop"]


@pytest.mark.parametrize("matcher", ["(" * 5000 + ")" * 5000, "x{99999999999}"])
def test_a_matcher_too_deep_or_too_large_is_a_clear_error(tmp_path: Path, matcher: str) -> None:
    """A regex nested past the parser's depth (or with a repeat count past its range) is the
    same one-line error as any bad regex, naming the file and the field, through the CLI;
    before, the nesting ended the run with a RecursionError traceback."""
    settings = tmp_path / "hooks.json"
    hooks = {"PreToolUse": [{"matcher": matcher, "hooks": [cmd("true")]}]}
    settings.write_text(json.dumps({"hooks": hooks}))
    script = write_script(tmp_path, [{"agent_type": "main", "turns": [{"text": "ok"}]}])
    run = run_script(script, tmp_path, "--settings", str(settings), env={"HOME": str(tmp_path)})
    assert run.code == 2, run.stderr[-500:]
    assert "Traceback" not in run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert f"{settings}: hooks.PreToolUse[0].matcher: invalid regular expression" in line
    assert len(line) < 400
