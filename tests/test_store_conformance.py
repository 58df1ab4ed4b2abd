"""Both stores keep the ``Store`` contract (subagents.testing.store_conformance)."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.state import ProjectState
from subagents.store import FileStore, MemoryStore, Store
from subagents.testing.store_conformance import (
    CHECKS,
    PROJECT_A,
    ConformanceError,
    StoreConformance,
)


def test_checks_are_collected() -> None:
    assert len(CHECKS) >= 9
    assert "lease_exclusive" in CHECKS


@pytest.mark.parametrize("check", CHECKS)
def test_memory_store(check: str) -> None:
    StoreConformance(MemoryStore).run(check)


@pytest.mark.parametrize("check", CHECKS)
def test_file_store(check: str, tmp_path: Path) -> None:
    homes = iter(range(1000))

    def make() -> Store:
        home = tmp_path / f"home{next(homes)}"
        return FileStore(ProjectState(home=home, project=Path(PROJECT_A)))

    StoreConformance(make).run(check)


def test_stores_satisfy_protocol(tmp_path: Path) -> None:
    assert isinstance(MemoryStore(), Store)
    assert isinstance(FileStore(ProjectState(home=tmp_path, project=tmp_path)), Store)


class _ForgetfulStore(MemoryStore):
    """A broken store: request_stop is not remembered."""

    def request_stop(self, agent_id: str):  # type: ignore[no-untyped-def]
        record = self.get(agent_id)
        assert record is not None
        return record


class _ResurrectingStore(MemoryStore):
    """A broken store: terminal records may go back to running."""

    def update(self, agent_id, **changes):  # type: ignore[no-untyped-def]
        record = self.get(agent_id)
        if record is not None and changes.get("status") == "running":
            self._records[agent_id] = record.__class__(**{**record.__dict__, "status": "running"})
            return self._records[agent_id]
        return super().update(agent_id, **changes)


def test_suite_catches_a_forgotten_stop() -> None:
    with pytest.raises(ConformanceError, match="stop"):
        StoreConformance(_ForgetfulStore).run("request_stop_visible")


def test_suite_catches_a_resurrection() -> None:
    with pytest.raises(ConformanceError, match="completed -> running"):
        StoreConformance(_ResurrectingStore).run("terminal_is_final")


def test_unknown_check_is_named() -> None:
    with pytest.raises(ValueError, match="no_such_check"):
        StoreConformance(MemoryStore).run("no_such_check")


def test_run_all_passes_a_conforming_store_and_stops_at_a_broken_one() -> None:
    """``run_all`` is how another store's test suite uses this one: every check, in order."""
    StoreConformance(MemoryStore).run_all()
    with pytest.raises(ConformanceError, match="stop"):
        StoreConformance(_ForgetfulStore).run_all()
