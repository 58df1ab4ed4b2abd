"""Both stores keep the ``Store`` contract (subagents.testing.store_conformance)."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.state import ProjectState
from subagents.store import FileStore, MemoryStore, Store
from subagents.store.capabilities import (
    BatchWrites,
    OwnerHeartbeats,
    OwnerWrites,
    RunningIndex,
    StopRequests,
)
from subagents.store.postgres import PostgresStore
from subagents.testing.pg_cluster import PgCluster
from subagents.testing.store_conformance import (
    CAPABILITIES,
    CHECKS,
    PROJECT_A,
    ConformanceError,
    StoreConformance,
)


def test_checks_are_collected() -> None:
    assert len(CHECKS) >= 9
    assert "lease_exclusive" in CHECKS


SHARED_ONLY = {check for check, needed in CAPABILITIES.items() if needed is OwnerHeartbeats}
"""Checks of what only a store every node reaches offers (one machine probes processes)."""


@pytest.mark.parametrize("check", CHECKS)
def test_memory_store(check: str) -> None:
    # every check applies but the multi-node ones
    assert StoreConformance(MemoryStore).run(check) == (check not in SHARED_ONLY)


@pytest.mark.parametrize("check", CHECKS)
def test_file_store(check: str, tmp_path: Path) -> None:
    homes = iter(range(1000))

    def make() -> Store:
        home = tmp_path / f"home{next(homes)}"
        return FileStore(ProjectState(home=home, project=Path(PROJECT_A)))

    assert StoreConformance(make).run(check) == (check not in SHARED_ONLY)


@pytest.mark.parametrize("check", CHECKS)
def test_postgres_store(check: str, pg_cluster: PgCluster) -> None:
    stores: list[PostgresStore] = []

    def make() -> Store:
        stores.append(PostgresStore(pg_cluster.fresh_url()))
        return stores[-1]

    try:
        assert StoreConformance(make).run(check)  # every check applies: all capabilities
    finally:
        for store in stores:
            store.close()


def test_stores_satisfy_protocol(tmp_path: Path) -> None:
    assert isinstance(MemoryStore(), Store)
    assert isinstance(FileStore(ProjectState(home=tmp_path, project=tmp_path)), Store)


@pytest.mark.parametrize("capability", [OwnerWrites, BatchWrites, StopRequests, RunningIndex])
def test_every_store_offers_every_capability(
    capability: type, tmp_path: Path, pg_cluster: PgCluster
) -> None:
    assert isinstance(MemoryStore(), capability)
    postgres = PostgresStore(pg_cluster.fresh_url())
    assert isinstance(postgres, capability) and isinstance(postgres, Store)
    postgres.close()
    assert isinstance(FileStore(ProjectState(home=tmp_path, project=tmp_path)), capability)


def test_only_the_store_every_node_reaches_keeps_owner_heartbeats(
    tmp_path: Path, pg_cluster: PgCluster
) -> None:
    postgres = PostgresStore(pg_cluster.fresh_url())
    assert isinstance(postgres, OwnerHeartbeats)
    postgres.close()
    assert not isinstance(MemoryStore(), OwnerHeartbeats)
    assert not isinstance(FileStore(ProjectState(home=tmp_path, project=tmp_path)), OwnerHeartbeats)


class _PlainStore:
    """The ``Store`` protocol and nothing more, delegating to a memory store."""

    def __init__(self) -> None:
        self._inner = MemoryStore()

    def create(self, record):  # type: ignore[no-untyped-def]
        return self._inner.create(record)

    def get(self, agent_id):  # type: ignore[no-untyped-def]
        return self._inner.get(agent_id)

    def update(self, agent_id, **changes):  # type: ignore[no-untyped-def]
        return self._inner.update(agent_id, **changes)

    def list_agents(self, project_path, *, session_id=None):  # type: ignore[no-untyped-def]
        return self._inner.list_agents(project_path, session_id=session_id)

    def touch_activity(self, agent_id):  # type: ignore[no-untyped-def]
        return self._inner.touch_activity(agent_id)

    def request_stop(self, agent_id):  # type: ignore[no-untyped-def]
        return self._inner.request_stop(agent_id)

    def take_lease(self, agent_id, owner):  # type: ignore[no-untyped-def]
        return self._inner.take_lease(agent_id, owner)

    def release_lease(self, agent_id, owner):  # type: ignore[no-untyped-def]
        return self._inner.release_lease(agent_id, owner)


def test_a_store_with_no_capability_passes_the_core_and_the_session_write_path() -> None:
    """Capabilities are optional: the session's writes take plain ``Store`` calls then."""
    store = _PlainStore()
    assert isinstance(store, Store) and not isinstance(store, OwnerWrites | BatchWrites)
    applied = StoreConformance(_PlainStore).run_all()
    assert "session_write_path" in applied
    assert set(applied) == set(CHECKS) - set(CAPABILITIES)


class _StopLosingStore(MemoryStore):
    """A broken store: a stop request is written into the record, so the owner's next
    whole-record write erases it."""

    def request_stop(self, agent_id: str):  # type: ignore[no-untyped-def]
        return self.update(agent_id, stop_requested=True)

    def stop_requested_ids(self, project_path):  # type: ignore[no-untyped-def]
        return {r.agent_id for r in self.list_agents(project_path) if r.stop_requested}


def test_suite_catches_an_owner_write_that_erases_a_stop_request() -> None:
    with pytest.raises(ConformanceError, match="erased a stop"):
        StoreConformance(_StopLosingStore).run("owner_write_keeps_a_stop_request")
    with pytest.raises(ConformanceError, match="stop request made while the owner writes"):
        StoreConformance(_StopLosingStore).run("session_write_path")


class _EagerStore(MemoryStore):
    """A broken store: an owner write is visible before its commit is published."""

    def prepare_owned(self, writes):  # type: ignore[no-untyped-def]
        commit = super().prepare_owned(writes)
        commit.publish()
        return commit


def test_suite_catches_an_owner_write_visible_before_its_publication() -> None:
    with pytest.raises(ConformanceError, match="visible before"):
        StoreConformance(_EagerStore).run("owner_writes_publish_in_order")


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
