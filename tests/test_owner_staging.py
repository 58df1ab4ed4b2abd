"""An owner write's staging and publication with fewer Python calls (issue 20, session 15): the
write made without the frozen ``__init__`` (``durable._owned_write``), a new record's name
checked by ``os.access`` instead of ``os.path.lexists``, an id checked at its first write only,
the renames and closes of ``publish_staged`` in line — each answering as before."""

from __future__ import annotations

import dataclasses
import errno
import os
import random
from pathlib import Path
from typing import Any

import pytest

from subagents.state import ProjectState
from subagents.store import FileStore
from subagents.store.atomic import publish_staged, stage_write
from subagents.store.capabilities import OwnedWrite, encode_record
from subagents.store.durable import _owned_write
from subagents.store.errors import DuplicateAgentError, InvalidRecordError
from subagents.store.records import AgentStatus
from subagents.testing.store_conformance import make_record

PROJECT = "/srv/project"


def _store(home: Path) -> FileStore:
    return FileStore(ProjectState(home=home, project=Path(PROJECT)))


def _write(agent_id: str, *, create: bool, status: AgentStatus = "running") -> OwnedWrite:
    record = dataclasses.replace(make_record(agent_id, project_path=PROJECT), status=status)
    return OwnedWrite(record=record, data=encode_record(record), create=create)


def _finish(commit: Any) -> list[BaseException | None]:
    commit.sync()
    commit.publish()
    commit.sync_renamed()
    errors: list[BaseException | None] = commit.errors
    return errors


def test_owned_write_is_the_frozen_dataclass_value() -> None:
    rng = random.Random(3)
    for index in range(50):
        record = make_record(f"a{index:08d}", project_path=PROJECT)
        data = rng.choice([b"", b"{}\n", encode_record(record)])
        create = rng.random() < 0.5
        made = _owned_write(record, data, create)
        reference = OwnedWrite(record, data, create)
        assert type(made) is OwnedWrite and made == reference and hash(made) == hash(reference)
        assert vars(made) == vars(reference) and list(vars(made)) == list(vars(reference))
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.create = not create  # type: ignore[misc]


@pytest.mark.parametrize("shape", ["nothing", "record", "dangling", "symlink", "folder", "fifo"])
def test_a_new_record_is_refused_where_lexists_sees_a_name(tmp_path: Path, shape: str) -> None:
    store = _store(tmp_path / "home")
    folder = store._agents_dir(PROJECT)
    path = folder / "a00000001.json"
    if shape == "record":
        assert _finish(store.prepare_owned([_write("a00000001", create=True)])) == [None]
        store = _store(tmp_path / "home")  # another session: nothing marked, nothing cached
    elif shape == "dangling":
        path.symlink_to(tmp_path / "missing")
    elif shape == "symlink":
        (tmp_path / "target").write_text("x")
        path.symlink_to(tmp_path / "target")
    elif shape == "folder":
        path.mkdir()
    elif shape == "fifo":
        os.mkfifo(path)
    expected = os.path.lexists(path)
    assert expected is (shape != "nothing")
    commit = store.prepare_owned([_write("a00000001", create=True)])
    refused = isinstance(commit.errors[0], DuplicateAgentError)
    assert refused is expected
    errors = _finish(commit)
    assert (errors[0] is None) is (not expected)
    assert [name for name in os.listdir(folder) if name.endswith(".tmp")] == []
    if shape == "symlink":
        assert (tmp_path / "target").read_text() == "x"  # never written through


@pytest.mark.parametrize("create", [True, False])
def test_an_unsafe_id_is_refused_at_every_write(tmp_path: Path, create: bool) -> None:
    """Only an id this store marked running (checked at that write) skips the check: a bad
    one is never marked, so each of its writes is refused, terminal ones included."""
    store = _store(tmp_path / "home")
    for bad in ["../escape", "a/b", "", ".hidden", "a" * 65]:
        record = dataclasses.replace(make_record("a00000001", project_path=PROJECT), agent_id=bad)
        statuses: list[AgentStatus] = ["running", "completed"]
        for status in statuses:
            data = encode_record(dataclasses.replace(record, status=status))
            write = OwnedWrite(dataclasses.replace(record, status=status), data, create)
            commit = store.prepare_owned([write])
            assert isinstance(commit.errors[0], InvalidRecordError), (bad, status)
            _finish(commit)
    assert not (tmp_path / "home" / "projects" / "escape").exists()
    good = store.prepare_owned([_write("a00000002", create=True)])
    assert _finish(good) == [None] and "a00000002" in store._marked
    done = store.prepare_owned([_write("a00000002", create=False, status="completed")])
    assert _finish(done) == [None] and "a00000002" not in store._marked
    stored = _store(tmp_path / "home").get("a00000002")
    assert stored is not None and stored.status == "completed"


def test_publish_renames_what_synced_and_closes_every_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random batches, some writes failed before (their sync), some renames refused: the
    others renamed, every temp file gone, every descriptor closed and marked closed."""
    rng = random.Random(11)
    real_rename = os.rename
    for _ in range(20):
        n = rng.randrange(1, 6)
        targets = [tmp_path / f"r{i}.json" for i in range(n)]
        writes = [stage_write(str(target), b"new %d" % i) for i, target in enumerate(targets)]
        descriptors = [write.fd for write in writes]
        errors: list[BaseException | None] = [
            OSError(errno.EIO, "sync") if rng.random() < 0.3 else None for _ in writes
        ]
        failing = {i for i in range(n) if errors[i] is None and rng.random() < 0.3}
        refused = {str(targets[i]) for i in failing}

        def rename(src: str, dst: str, _refused: set[str] = refused) -> None:
            if dst in _refused:
                raise OSError(errno.EXDEV, "rename refused")
            real_rename(src, dst)

        monkeypatch.setattr(os, "rename", rename)
        before = list(errors)
        publish_staged(writes, errors)
        monkeypatch.setattr(os, "rename", real_rename)
        for i, (write, target) in enumerate(zip(writes, targets, strict=True)):
            assert write.fd == -1
            with pytest.raises(OSError):
                os.fstat(descriptors[i])  # closed
            renamed = before[i] is None and i not in failing
            assert (errors[i] is None) is renamed
            assert target.exists() is renamed and not os.path.exists(write.temp)
            if renamed:
                assert target.read_bytes() == b"new %d" % i
                target.unlink()
            elif i in failing:
                assert isinstance(errors[i], OSError) and errors[i].errno == errno.EXDEV  # type: ignore[union-attr]


def test_a_written_record_is_served_from_the_cache_and_its_marker_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After each write the store's cache answers ``get`` with the record written (its file's
    signature noted right); a running record whose marker could not be linked before its
    rename gets it after, and the terminal write retires it."""
    from subagents.store import files

    store = _store(tmp_path / "home")
    real_link = files._link_marker
    failures = [OSError(errno.EMLINK, "no link now")]

    def link(sidecar: str, path: str) -> None:
        if failures:
            raise failures.pop()
        real_link(sidecar, path)

    monkeypatch.setattr(files, "_link_marker", link)
    first = _write("a00000001", create=True)
    assert _finish(store.prepare_owned([first])) == [None]
    markers = store._agents_dir(PROJECT) / ".running"
    assert os.listdir(markers) == ["a00000001"] and not failures  # linked after the rename
    assert store.get("a00000001") is first.record  # from the cache: its signature matches
    again = dataclasses.replace(first.record, description="later")
    write = OwnedWrite(again, encode_record(again), False)
    assert _finish(store.prepare_owned([write])) == [None]
    assert store.get("a00000001") is again and os.listdir(markers) == ["a00000001"]
    done = _write("a00000001", create=False, status="completed")
    assert _finish(store.prepare_owned([done])) == [None]
    assert store.get("a00000001") is done.record and os.listdir(markers) == []
    assert [r.agent_id for r in _store(tmp_path / "home").list_running(PROJECT)] == []
