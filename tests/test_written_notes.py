"""What the file store notes of a record it has just written (``FileStore._remember_written``):
the cache entry, the activity throttle and the running marker follow the record's
``is_terminal``, which the store reads once per write as ``status in TERMINAL_STATUSES`` — the
shortcut is compared here with the property, for every status and every order of writes."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import get_args

import pytest

from subagents.state import ProjectState
from subagents.store import FileStore, SidecarRecord
from subagents.store.cache import RecordCache
from subagents.store.files import OwnedWrite, encode_record
from subagents.store.records import AgentStatus
from subagents.testing.store_conformance import make_record

PROJECT = "/srv/project"
STATUSES: tuple[AgentStatus, ...] = get_args(AgentStatus)


def _write(store: FileStore, record: SidecarRecord, *, create: bool = False) -> None:
    commit = store.prepare_owned(
        [OwnedWrite(record=record, data=encode_record(record), create=create)]
    )
    commit.sync()
    commit.publish()
    commit.sync_renamed()
    assert commit.errors == [None]


def _expect(store: FileStore, record: SidecarRecord, written: list[str]) -> None:
    """The store's notes of ``record``, as its ``is_terminal`` (the plain form) says."""
    running = not record.is_terminal
    agent_id = record.agent_id
    markers = store.state.agents_dir / ".running"
    assert (agent_id in os.listdir(markers)) is running
    assert (agent_id in {r.agent_id for r in store.list_running(PROJECT)}) is running
    assert store.cache.terminal_count == sum(
        1 for status in written if status in ("completed", "failed", "killed")
    )
    assert (agent_id in store._activity._written) is running
    fresh = FileStore(ProjectState(home=store.state.home, project=Path(PROJECT)))
    assert fresh.get(agent_id) == store.get(agent_id) == record


@pytest.mark.parametrize("final", STATUSES)
def test_a_written_records_notes_follow_its_is_terminal(tmp_path: Path, final: str) -> None:
    store = FileStore(ProjectState(home=tmp_path / "home", project=Path(PROJECT)))
    written: list[str] = []
    for index, status in enumerate(("running", "running", final)):
        record = make_record("a00000001", project_path=PROJECT, last_active_at=1_000.0 + index)
        record = replace(record, status=status)
        _write(store, record, create=index == 0)
        written.append(status)
        _expect(store, record, written)


def test_a_record_cache_entry_goes_where_its_status_says_whatever_the_caller_passes() -> None:
    """``RecordCache.put``'s ``terminal`` is the caller's ``is_terminal``; without it the cache
    asks the record, and both place every status alike."""
    for status in STATUSES:
        record = replace(make_record("a00000001"), status=status)
        told, asked = RecordCache(4), RecordCache(4)
        told.put(record, (1, 2, 3), record.is_terminal)
        asked.put(record, (1, 2, 3))
        assert told.terminal_count == asked.terminal_count == int(record.is_terminal)
        assert told.get("a00000001", (1, 2, 3)) is asked.get("a00000001", (1, 2, 3)) is record
        told.put(replace(record, status="running"), (1, 2, 4), False)
        assert told.terminal_count == 0 and len(told) == 1
