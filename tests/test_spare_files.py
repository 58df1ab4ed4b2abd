"""Spare files: a finished run's first record version is rewritten by a later owner write instead
of a new inode being made (``FileStore._retire_marker``, ``atomic.stage_write(reuse=)``; issue 20
target 5: on ext4 a file create costs 20-500 µs of kernel CPU). What is written when is unchanged
for every reader, and a kill -9 at each new step loses nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from subagents.state import ProjectState
from subagents.store import FileStore, SidecarRecord
from subagents.store.files import SPARE_DIR, OwnedWrite, encode_record
from subagents.testing.store_conformance import make_record

PROJECT = "/srv/project"


def _store(tmp_path: Path) -> FileStore:
    return FileStore(ProjectState(home=tmp_path / "home", project=Path(PROJECT)))


def _write(store: FileStore, record: SidecarRecord, *, create: bool = False) -> None:
    commit = store.prepare_owned(
        [OwnedWrite(record=record, data=encode_record(record), create=create)]
    )
    commit.sync()
    commit.publish()
    commit.sync_renamed()
    assert commit.errors == [None]


def _agents(store: FileStore) -> Path:
    return store.state.agents_dir


def _inode(store: FileStore, agent_id: str) -> int:
    path = store.sidecar_path(agent_id)
    assert path is not None
    return path.stat().st_ino


def test_a_finished_records_first_version_becomes_the_next_records_file(tmp_path: Path) -> None:
    store = _store(tmp_path)
    first = make_record("a00000001", project_path=PROJECT)
    _write(store, first, create=True)
    inode = _inode(store, "a00000001")
    assert os.listdir(_agents(store) / ".running") == ["a00000001"]
    _write(store, replace(first, status="completed"))
    assert os.listdir(_agents(store) / ".running") == []  # in step with the record, as before
    spares = _agents(store) / SPARE_DIR
    assert os.listdir(spares) == ["a00000001"] and (spares / "a00000001").stat().st_ino == inode
    assert oct((spares).stat().st_mode & 0o777) == "0o700"

    second = make_record("a00000002", project_path=PROJECT, description="the second")
    _write(store, second, create=True)
    assert _inode(store, "a00000002") == inode, "the spare was rewritten, not a new file made"
    assert os.listdir(spares) == []
    fresh = _store(tmp_path)  # another reader sees exactly the records written
    one, two = fresh.get("a00000001"), fresh.get("a00000002")
    assert one is not None and one.status == "completed"
    assert two is not None and two.description == "the second" and two.status == "running"
    assert sorted(r.agent_id for r in fresh.list_agents(PROJECT)) == ["a00000001", "a00000002"]
    assert (_agents(store) / "a00000002.json").stat().st_mode & 0o777 == 0o600


def test_a_shorter_record_written_into_a_longer_spare_leaves_no_tail(tmp_path: Path) -> None:
    store = _store(tmp_path)
    first = make_record("a00000001", project_path=PROJECT, description="long " * 400)
    _write(store, first, create=True)
    _write(store, replace(first, status="completed"))  # its first version becomes a spare
    spare = _agents(store) / SPARE_DIR / "a00000001"
    assert spare.stat().st_size > 2000
    second = make_record("a00000002", project_path=PROJECT, description="short")
    _write(store, second, create=True)
    path = _agents(store) / "a00000002.json"
    assert path.read_bytes() == encode_record(second)  # the spare's old bytes are cut off
    fresh = _store(tmp_path).get("a00000002")
    assert fresh is not None and fresh.description == "short"


def test_close_removes_the_spares(tmp_path: Path) -> None:
    store = _store(tmp_path)
    records = [make_record(f"a0000000{n}", project_path=PROJECT) for n in (1, 2)]
    for record in records:
        _write(store, record, create=True)
    for record in records:
        _write(store, replace(record, status="completed"))
    # Finishing the second rewrote the first's spare and retired its own first version.
    assert os.listdir(_agents(store) / SPARE_DIR) == ["a00000002"]
    store.close()
    assert os.listdir(_agents(store) / SPARE_DIR) == []
    _write(store, make_record("a00000003", project_path=PROJECT), create=True)  # still usable


def test_a_spare_with_another_name_is_never_truncated(tmp_path: Path) -> None:
    store = _store(tmp_path)
    first = make_record("a00000001", project_path=PROJECT)
    _write(store, first, create=True)
    _write(store, replace(first, status="completed"))
    spare = _agents(store) / SPARE_DIR / "a00000001"
    elsewhere = tmp_path / "someone-elses-link"
    os.link(spare, elsewhere)  # the file got a second name: it is no longer ours to rewrite
    before = elsewhere.read_bytes()
    _write(store, make_record("a00000002", project_path=PROJECT), create=True)
    assert elsewhere.read_bytes() == before
    assert _inode(store, "a00000002") != elsewhere.stat().st_ino


_CRASH = """
import os, sys
from dataclasses import replace
from pathlib import Path
from subagents.state import ProjectState
from subagents.store import FileStore
from subagents.store.files import OwnedWrite, encode_record
from subagents.testing.store_conformance import make_record

store = FileStore(ProjectState(home=Path(sys.argv[1]), project=Path("/srv/project")))
point = sys.argv[2]

def write(record, create=False):
    commit = store.prepare_owned([OwnedWrite(record=record, data=encode_record(record), create=create)])
    commit.sync()
    commit.publish()
    commit.sync_renamed()

first = make_record("a00000001", project_path="/srv/project", description="first")
write(first, create=True)
if point == "retiring":  # die while the terminal write retires the marker into a spare
    real = os.rename
    def rename(src, dst, *a, **k):
        if "/.spare/" in str(dst):
            os.kill(os.getpid(), 9)
        return real(src, dst, *a, **k)
    os.rename = rename
write(replace(first, status="completed", description="first done"))
second = make_record("a00000002", project_path="/srv/project", description="second")
if point == "rewriting":  # die after the spare was overwritten, before its rename
    os.rename = lambda *a, **k: os.kill(os.getpid(), 9)
write(second, create=True)
os.kill(os.getpid(), 9)  # "written": die right after, without close
"""


def _crash(tmp_path: Path, point: str) -> FileStore:
    done = subprocess.run(
        [sys.executable, "-c", _CRASH, str(tmp_path / "home"), point], check=False, timeout=60
    )
    assert done.returncode == -signal.SIGKILL
    return _store(tmp_path)


def _loaded(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_kill_9_while_a_marker_is_retired_loses_nothing(tmp_path: Path) -> None:
    store = _crash(tmp_path, "retiring")
    record = store.get("a00000001")
    assert record is not None and record.status == "completed"
    assert record.description == "first done"
    # The marker outlived the crash at worst: start-up recovery reads the record, which is
    # terminal, so nothing is taken for an orphan.
    assert [r.agent_id for r in store.list_running(PROJECT) if not r.is_terminal] == []
    assert [r.agent_id for r in store.list_agents(PROJECT)] == ["a00000001"]


def test_kill_9_while_a_spare_is_rewritten_loses_nothing(tmp_path: Path) -> None:
    store = _crash(tmp_path, "rewriting")
    record = store.get("a00000001")
    assert record is not None and record.status == "completed"
    assert store.get("a00000002") is None  # never published: as a torn temp file before
    assert [r.agent_id for r in store.list_agents(PROJECT)] == ["a00000001"]
    assert [r.agent_id for r in store.list_running(PROJECT)] == []
    # The spare holds the new record's bytes or part of them: never read as a record.
    leftovers = os.listdir(store.state.agents_dir / SPARE_DIR)
    assert leftovers == ["a00000001"]
    assert not (store.state.agents_dir / "a00000002.json").exists()
    # The project goes on: the same id can still be created.
    _write(store, make_record("a00000002", project_path=PROJECT), create=True)


def test_kill_9_after_a_rewritten_spare_was_published_keeps_both_records(tmp_path: Path) -> None:
    store = _crash(tmp_path, "written")
    one, two = store.get("a00000001"), store.get("a00000002")
    assert one is not None and one.status == "completed" and one.description == "first done"
    assert two is not None and two.status == "running" and two.description == "second"
    path = store.sidecar_path("a00000002")
    assert path is not None and _loaded(path)["agentId"] == "a00000002"
    assert [r.agent_id for r in store.list_running(PROJECT)] == ["a00000002"]
