"""Which model ``subagents -p`` runs on when none is named (SPEC §16), without any network.

``choose_model`` is the whole rule; the command-line tests check the ends a user sees: a fresh
machine without the local model gets one line saying how to install it (exit 2), and an explicit
choice wins over any key in the environment.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import run_cli, write_script
from subagents.cli.headless import StartupError, check_local_model, choose_model

KEY = {"ANTHROPIC_API_KEY": "sk-test"}
SERVER = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_MODEL": "qwen2.5-coder"}


@pytest.mark.parametrize(
    ("cli_model", "env", "expected"),
    [
        (None, {}, "local"),
        (None, KEY, "anthropic:sonnet"),
        (None, SERVER, "openai:qwen2.5-coder"),
        (None, {**KEY, **SERVER}, "anthropic:sonnet"),
        (None, {"SUBAGENTS_MODEL": "local:smollm2", **KEY, **SERVER}, "local:smollm2"),
        ("scripted:s.json", {"SUBAGENTS_MODEL": "local", **KEY, **SERVER}, "scripted:s.json"),
        ("openai:other", KEY, "openai:other"),
        (None, {"ANTHROPIC_API_KEY": "", "SUBAGENTS_MODEL": ""}, "local"),
        (None, {"OPENAI_MODEL": "ignored-without-a-url"}, "local"),
    ],
)
def test_model_precedence(cli_model: str | None, env: dict[str, str], expected: str) -> None:
    assert choose_model(cli_model, env) == expected


def test_openai_base_url_needs_a_model_name() -> None:
    with pytest.raises(StartupError, match="OPENAI_MODEL"):
        choose_model(None, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    with pytest.raises(StartupError, match="OPENAI_MODEL"):
        choose_model(None, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_MODEL": " "})
    # An explicit model needs no OPENAI_MODEL.
    assert choose_model("openai:m", {"OPENAI_BASE_URL": "http://x/v1"}) == "openai:m"


def test_missing_local_model_names_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENTS_MODELS_DIR", str(tmp_path / "no-models"))
    with pytest.raises(StartupError, match="subagents model install") as implicit:
        check_local_model("local", explicit=False)
    assert "ANTHROPIC_API_KEY" in str(implicit.value)
    with pytest.raises(StartupError, match="subagents model install") as explicit:
        check_local_model("local", explicit=True)
    assert "ANTHROPIC_API_KEY" not in str(explicit.value)
    check_local_model("scripted:whatever.json", explicit=False)  # other providers: no check


def test_fresh_machine_without_the_model_exits_2_with_one_line(tmp_path: Path) -> None:
    env = {"SUBAGENTS_MODELS_DIR": str(tmp_path / "no-models")}
    run = run_cli("-p", "hello", cwd=tmp_path, env=env)
    assert run.code == 2, run
    assert run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("subagents: error: ")
    assert "subagents model install" in lines[0]


def test_openai_url_without_model_exits_2(tmp_path: Path) -> None:
    run = run_cli("-p", "hello", cwd=tmp_path, env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert run.code == 2, run
    assert run.stderr.strip().count("\n") == 0
    assert "OPENAI_MODEL" in run.stderr


def test_subagents_model_wins_over_an_api_key(tmp_path: Path) -> None:
    script = write_script(
        tmp_path, [{"agent_type": "main", "turns": [{"text": "scripted answer"}]}]
    )
    env = {**KEY, **SERVER, "SUBAGENTS_MODEL": f"scripted:{script}"}
    run = run_cli("-p", "hello", cwd=tmp_path, env=env)
    assert run.code == 0, run
    assert run.stdout.strip() == "scripted answer"
