"""Group commit of sidecar writes: ``FileStore.apply_batch``, ``atomic.commit_writes`` and the
``DurableWriter`` handing queued store calls over in batches — on real files, with a real
``SIGKILL`` mid-batch."""

from __future__ import annotations

import concurrent.futures
import errno
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from subagents.state import ProjectState
from subagents.store import (
    DuplicateAgentError,
    FileStore,
    MemoryStore,
    SidecarRecord,
    TerminalStatusError,
    UnknownAgentError,
    atomic,
)
from subagents.store.files import BatchOp
from subagents.store.writer import DurableWriter
from subagents.testing.store_conformance import make_record

PROJECT = "/srv/project"
OTHER = "/srv/other"


def _store(tmp_path: Path) -> FileStore:
    return FileStore(ProjectState(home=tmp_path / "home", project=Path(PROJECT)))


def _record(agent_id: str, project: str = PROJECT, **overrides: Any) -> SidecarRecord:
    return make_record(agent_id, project_path=project, **overrides)


def _disk(store: FileStore, agent_id: str) -> dict[str, Any]:
    path = store.sidecar_path(agent_id)
    assert path is not None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _temps(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


@pytest.fixture
def writer() -> Iterator[DurableWriter]:
    w = DurableWriter(name="test-store")
    yield w
    w.close()


def _hold(writer: DurableWriter) -> threading.Event:
    """Keep the worker busy until the returned event is set, so later submissions queue up."""
    started, release = threading.Event(), threading.Event()

    def block() -> None:
        started.set()
        release.wait(10)

    writer.submit(block)
    assert started.wait(10)
    return release


# -- FileStore.apply_batch -------------------------------------------------------------------


def test_a_batch_of_many_ops_on_several_records_ends_with_the_right_records(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    store.create(_record("a00000000", description="existing"))
    ops = [
        BatchOp("create", (_record("a00000001"),)),
        BatchOp("create", (_record("a00000002", OTHER),)),
        BatchOp("update", ("a00000001",), {"description": "one"}),
        BatchOp("update", ("a00000000",), {"description": "changed"}),
        BatchOp("update", ("a00000001",), {"description": "two"}),
        BatchOp("request_stop", ("a00000002",)),
        BatchOp("update", ("a00000001",), {"status": "completed"}),
        BatchOp("update", ("a00000001",), {"status": "running"}),  # terminal is final
        BatchOp("update", ("a00000002",), {"description": "other project"}),
    ]
    outcomes = store.apply_batch(ops)
    errors = [type(o.error) if o.error else None for o in outcomes]
    assert errors == [None] * 7 + [TerminalStatusError, None]
    # each op saw the versions staged by the ops before it
    assert outcomes[4].value.description == "two"
    assert outcomes[6].value.description == "two" and outcomes[6].value.status == "completed"
    assert outcomes[8].value.stop_requested is True
    fresh = _store(tmp_path)  # no cache: what is on disk
    first, second, third = (fresh.get(f"a0000000{i}") for i in range(3))
    assert first is not None and first.description == "changed"
    assert second is not None and (second.description, second.status) == ("two", "completed")
    assert third is not None and third.project_path == OTHER
    assert (third.description, third.stop_requested) == ("other project", True)
    assert [r.agent_id for r in fresh.list_agents(OTHER)] == ["a00000002"]
    for folder in (
        store.state.agents_dir,
        ProjectState(home=store.state.home, project=Path(OTHER)).agents_dir,
    ):
        assert _temps(folder) == []


def test_refused_ops_fail_alone_and_leave_their_record_untouched(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create(_record("a00000001", description="before"))
    outcomes = store.apply_batch(
        [
            BatchOp("create", (_record("a00000001"),)),  # duplicate on disk
            BatchOp("update", ("a00000009",), {"description": "x"}),  # unknown id
            BatchOp("create", (_record("a00000002"),)),
            BatchOp("create", (_record("a00000002"),)),  # duplicate within the batch
            BatchOp("update", ("a00000001",), {"no_such_field": 1}),
            BatchOp("update", ("../escape",), {}),
            BatchOp("touch_activity", ("a00000002",)),
        ]
    )
    kinds = [type(o.error).__name__ if o.error else None for o in outcomes]
    assert kinds == [
        "DuplicateAgentError",
        "UnknownAgentError",
        None,
        "DuplicateAgentError",
        "InvalidRecordError",
        "InvalidRecordError",
        None,
    ]
    assert _disk(store, "a00000001")["description"] == "before"
    assert _disk(store, "a00000002")["agentId"] == "a00000002"


def test_a_record_whose_write_fails_fails_its_ops_and_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    store.create(_record("a00000001", description="before"))
    real_rename = os.rename

    def rename(src: Any, dst: Any) -> None:
        if str(dst).endswith("a00000001.json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    outcomes = store.apply_batch(
        [
            BatchOp("update", ("a00000001",), {"description": "lost"}),
            BatchOp("create", (_record("a00000002"),)),
            BatchOp("update", ("a00000001",), {"description": "lost too"}),
        ]
    )
    monkeypatch.undo()
    assert [isinstance(o.error, OSError) for o in outcomes] == [True, False, True]
    assert _temps(store.state.agents_dir) == []
    fresh = _store(tmp_path)
    kept = fresh.get("a00000001")
    assert kept is not None and kept.description == "before"
    assert fresh.get("a00000002") is not None


# -- commit_writes ---------------------------------------------------------------------------


def _count_calls(monkeypatch: pytest.MonkeyPatch, fn: Callable[[int], None] | None) -> list[int]:
    calls: list[int] = []

    def counted(fd: int) -> None:
        calls.append(fd)
        if fn is not None:
            fn(fd)

    monkeypatch.setattr(atomic, "_syncfs", lambda: counted)
    return calls


def test_many_files_share_one_syncfs_and_one_fsync_per_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = atomic._syncfs()
    if real is None:
        pytest.skip("syncfs(2) is not available here")
    syncs = _count_calls(monkeypatch, real)
    dirs: list[str] = []
    real_fsync_dir = atomic.fsync_dir

    def fsync_dir(path: str | Path) -> None:
        dirs.append(str(path))
        real_fsync_dir(path)

    monkeypatch.setattr(atomic, "fsync_dir", fsync_dir)
    (tmp_path / "b").mkdir()
    staged = [atomic.stage_write(str(tmp_path / f"f{i}.json"), b"%d" % i) for i in range(5)]
    staged.append(atomic.stage_write(str(tmp_path / "b" / "g.json"), b"g"))
    assert atomic.commit_writes(staged) == [None] * 6
    assert len(syncs) == 1
    assert sorted(dirs) == sorted([str(tmp_path), str(tmp_path / "b")])
    assert (tmp_path / "f3.json").read_bytes() == b"3"
    assert _temps(tmp_path) == []


def test_without_syncfs_or_when_it_fails_each_file_is_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsyncs: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        fsyncs.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)

    def broken(fd: int) -> None:
        raise OSError(errno.EIO, "syncfs: I/O error")

    for syncfs in (None, broken):
        fsyncs.clear()
        monkeypatch.setattr(atomic, "_syncfs", lambda s=syncfs: s)
        staged = [atomic.stage_write(str(tmp_path / f"f{i}.json"), b"new") for i in range(3)]
        assert atomic.commit_writes(staged) == [None] * 3
        assert len(fsyncs) == 3 + 1  # three files, then their one directory
        assert (tmp_path / "f2.json").read_bytes() == b"new"


# -- a real crash in the middle of a batch ---------------------------------------------------

_CRASH_SCRIPT = """
import sys, time
from pathlib import Path
from subagents.state import ProjectState
from subagents.store import FileStore, atomic
from subagents.store.files import BatchOp
from subagents.testing.store_conformance import make_record

real = atomic._sync_files
def synced_then_stall(writes, errors):
    real(writes, errors)
    print("staged", len(writes), flush=True)  # temp files durable, nothing renamed yet
    time.sleep(60)
atomic._sync_files = synced_then_stall

project = sys.argv[2]
store = FileStore(ProjectState(home=Path(sys.argv[1]), project=Path(project)))
store.apply_batch([
    BatchOp("update", ("a00000001",), {"description": "never visible"}),
    BatchOp("create", (make_record("a00000003", project_path=project),)),
    BatchOp("update", ("a00000002",), {"status": "completed"}),
])
"""


def test_a_kill_after_the_temp_writes_leaves_the_old_records_and_ignored_temps(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    store.create(_record("a00000001", description="before"))
    store.create(_record("a00000002", description="running"))
    child = subprocess.Popen(
        [sys.executable, "-c", _CRASH_SCRIPT, str(tmp_path / "home"), PROJECT],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "staged 3"
        assert len(_temps(store.state.agents_dir)) == 3
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    assert child.returncode == -signal.SIGKILL
    fresh = _store(tmp_path)
    first, second = fresh.get("a00000001"), fresh.get("a00000002")
    assert first is not None and first.description == "before"
    assert second is not None and second.status == "running"
    assert fresh.get("a00000003") is None
    assert [r.agent_id for r in fresh.list_agents(PROJECT)] == ["a00000001", "a00000002"]
    assert fresh.update("a00000002", status="completed").status == "completed"
    fresh.create(_record("a00000003"))  # the crashed create left no record behind


# -- DurableWriter batching ------------------------------------------------------------------


def test_ops_queued_while_the_worker_is_busy_go_to_the_store_as_one_batch(
    tmp_path: Path, writer: DurableWriter
) -> None:
    store = _store(tmp_path)
    release = _hold(writer)
    futures: list[concurrent.futures.Future[Any]] = []
    for i in range(10):
        futures.append(writer.submit(store.create, _record(f"a{i:08d}")))
    for i in range(10):
        futures.append(writer.submit(store.update, f"a{i:08d}", status="completed"))
    release.set()
    results = [f.result(10) for f in futures]
    assert writer.stats.batches == 1
    assert writer.stats.batched_ops == writer.stats.largest_batch == 20
    assert [r.status for r in results[10:]] == ["completed"] * 10
    fresh = _store(tmp_path)
    assert [r.status for r in fresh.list_agents(PROJECT)] == ["completed"] * 10


def test_a_failing_op_fails_only_its_own_future(
    tmp_path: Path, writer: DurableWriter, caplog: pytest.LogCaptureFixture
) -> None:
    store = _store(tmp_path)
    release = _hold(writer)
    ok1 = writer.submit(store.create, _record("a00000001"))
    bad = writer.submit(store.update, "a00000009", description="nobody")
    dup = writer.submit(store.create, _record("a00000001"))
    ok2 = writer.submit(store.update, "a00000001", description="after")
    release.set()
    assert ok2.result(10).description == "after"
    assert ok1.result(10) is None
    assert isinstance(bad.exception(10), UnknownAgentError)
    assert isinstance(dup.exception(10), DuplicateAgentError)
    assert writer.stats.batches == 1 and writer.stats.batched_ops == 4
    assert "a00000009" in caplog.text  # failures are logged, not only kept in the future
    assert _disk(store, "a00000001")["description"] == "after"


def test_other_calls_split_batches_and_keep_their_place_in_the_order(
    tmp_path: Path, writer: DurableWriter
) -> None:
    store = _store(tmp_path)
    seen: list[str | None] = []

    def observe() -> None:
        record = _store(tmp_path).get("a00000001")  # a fresh store: what is on disk
        seen.append(None if record is None else record.description)

    release = _hold(writer)
    writer.submit(store.create, _record("a00000001", description="first"))
    writer.submit(observe)
    writer.submit(store.update, "a00000001", description="second")
    writer.submit(store.update, "a00000001", description="third")
    last = writer.submit(observe)
    release.set()
    last.result(10)
    assert seen == ["first", "third"]
    assert writer.stats.batches == 2 and writer.stats.batched_ops == 3


def test_a_store_without_the_batch_hook_is_called_op_by_op(writer: DurableWriter) -> None:
    store = MemoryStore()
    release = _hold(writer)
    create = writer.submit(store.create, _record("a00000001"))
    update = writer.submit(store.update, "a00000001", description="changed")
    release.set()
    assert create.result(10) is None and update.result(10).description == "changed"
    assert writer.stats.batches == 0 and writer.stats.single_calls == 3  # incl. the hold


async def test_close_drains_and_the_worker_restarts_after_idling(tmp_path: Path) -> None:
    writer = DurableWriter(name="test-idle")
    store = _store(tmp_path)
    first = writer.submit(store.create, _record("a00000001"))
    await writer.wait(first)
    second = writer.submit(store.update, "a00000001", description="queued")
    writer.close()
    assert second.done() and second.result().description == "queued"
    writer.close()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        writer.submit(store.update, "a00000001")


# -- DurableRecords: no activity write right after the running record --------------------------


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def create(self, record: SidecarRecord) -> None:
        self.calls.append("create")
        super().create(record)

    def update(self, agent_id: str, **changes: Any) -> SidecarRecord:
        self.calls.append("update")
        return super().update(agent_id, **changes)

    def touch_activity(self, agent_id: str) -> None:
        self.calls.append("touch_activity")
        super().touch_activity(agent_id)


async def test_a_short_child_writes_its_running_and_terminal_records_and_nothing_else(
    tmp_path: Path,
) -> None:
    from subagents.agents.agent_tool import AgentTool
    from subagents.session import Session, SessionOptions
    from subagents.testing import ScriptedModel

    call = {"description": "job", "prompt": "job", "subagent_type": "worker"}
    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [{"tool_calls": [{"name": "Agent", "input": call}]}, {"text": "done"}],
            },
            {"agent_type": "worker", "turns": [{"text": "worker done"}]},
        ]
    }
    store = CountingStore()
    session = Session(
        SessionOptions(
            model=ScriptedModel.from_dict(script),
            cwd=tmp_path,
            home=tmp_path / "home",
            tools=[AgentTool()],
            agents_json=json.dumps({"worker": {"description": "w", "prompt": "You work."}}),
            store=store,
            load_settings=False,
        )
    )
    result = await session.run("go")
    assert not result.is_error, result.result
    assert store.calls == ["create", "update"]  # the child's first turn wrote no activity
    [record] = store.list_agents(str(tmp_path))
    assert record.status == "completed"


def test_running_index_lists_only_running_records(tmp_path: Path) -> None:
    from subagents.state import ProjectState
    from subagents.store import FileStore, Lineage, SidecarRecord

    store = FileStore(ProjectState(home=tmp_path, project=tmp_path))

    def record(agent_id: str) -> SidecarRecord:
        return SidecarRecord(
            agent_id=agent_id,
            agent_type="x",
            session_id="s",
            project_path=str(tmp_path),
            lineage=Lineage(root_agent_id=agent_id),
            created_at=1.0,
            last_active_at=1.0,
        )

    for agent_id in ("a00000001", "a00000002", "a00000003"):
        store.create(record(agent_id))
    store.update("a00000002", status="completed")
    fresh = FileStore(ProjectState(home=tmp_path, project=tmp_path))
    assert [r.agent_id for r in fresh.list_running(tmp_path)] == ["a00000001", "a00000003"]
    markers = ProjectState(home=tmp_path, project=tmp_path).agents_dir / ".running"
    assert sorted(p.name for p in markers.iterdir()) == ["a00000001", "a00000003"]
    fresh.update("a00000003", status="killed")
    assert [r.agent_id for r in fresh.list_running(tmp_path)] == ["a00000001"]
    # A project written before the index existed is scanned whole.
    for marker in markers.iterdir():
        marker.unlink()
    markers.rmdir()
    assert [r.agent_id for r in fresh.list_running(tmp_path)] == ["a00000001"]


# -- owner writes: staged on the caller's thread, synced elsewhere ---------------------------


def _owned(record: SidecarRecord, *, create: bool = False) -> Any:
    from subagents.store.files import OwnedWrite, encode_record

    return OwnedWrite(record=record, data=encode_record(record), create=create)


def _finish(commit: Any) -> list[BaseException | None]:
    commit.sync()
    commit.publish()
    commit.sync_renamed()
    errors: list[BaseException | None] = commit.errors
    return errors


def test_owner_writes_are_atomic_private_and_indexed(tmp_path: Path) -> None:
    from dataclasses import replace

    store = _store(tmp_path)
    first, second = _record("a00000001"), _record("a00000002")
    commit = store.prepare_owned([_owned(first, create=True), _owned(second, create=True)])
    folder = store.state.home / "projects"
    assert not list(folder.rglob("*.json"))  # staged only: nothing visible before publish
    assert _finish(commit) == [None, None]
    path = store.sidecar_path("a00000001")
    assert path is not None and os.stat(path).st_mode & 0o777 == 0o600
    assert _temps(path.parent) == []
    assert sorted(os.listdir(path.parent / ".running")) == ["a00000001", "a00000002"]
    done = replace(first, status="completed")
    assert _finish(store.prepare_owned([_owned(done)])) == [None]
    fresh = _store(tmp_path)
    stored = fresh.get("a00000001")
    assert stored is not None and stored.status == "completed"
    assert os.listdir(path.parent / ".running") == ["a00000002"]
    again = store.prepare_owned([_owned(_record("a00000002"), create=True)])
    assert isinstance(again.errors[0], DuplicateAgentError)
    assert _finish(again)[0] is not None and _temps(path.parent) == []


def test_a_failed_sync_renames_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    commit = store.prepare_owned([_owned(_record("a00000001"), create=True)])
    commit.publish(failed=OSError(errno.EIO, "disk gone"))
    assert isinstance(commit.errors[0], OSError)
    assert store.get("a00000001") is None
    agents = store.state.home / "projects"
    assert not [p for p in agents.rglob("*") if p.is_file() and ".running" not in str(p)]


def test_a_stop_request_from_another_process_survives_the_owners_next_write(
    tmp_path: Path,
) -> None:
    """``tasks stop`` runs in another process while the owner keeps writing the sidecar
    without a lock: the request is a file of its own, so no owner write can erase it."""
    from dataclasses import replace

    owner = _store(tmp_path)
    record = _record("a00000001")
    assert _finish(owner.prepare_owned([_owned(record, create=True)])) == [None]
    script = (
        "import sys; from pathlib import Path; from subagents.state import ProjectState;"
        "from subagents.store import FileStore;"
        "s = FileStore(ProjectState(home=Path(sys.argv[1]), project=Path(sys.argv[2])));"
        "print(s.request_stop('a00000001').stop_requested)"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "home"), PROJECT],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "True"
    later = replace(record, last_active_at=record.last_active_at + 5)
    assert _finish(owner.prepare_owned([_owned(later)])) == [None]
    seen = _store(tmp_path).get("a00000001")
    assert seen is not None and seen.stop_requested and seen.last_active_at == later.last_active_at
    assert owner.get("a00000001").stop_requested  # type: ignore[union-attr]


async def test_the_commit_pipeline_keeps_order_and_reports_each_commit_once(
    tmp_path: Path,
) -> None:
    import asyncio
    from dataclasses import replace

    from subagents.store.pipeline import CommitPipeline

    store, writer = _store(tmp_path), DurableWriter(name="test-pipeline")
    pipeline = CommitPipeline(writer=writer, loop=asyncio.get_running_loop())
    done: list[tuple[str, str, list[BaseException | None]]] = []
    record = _record("a00000001")
    second = replace(record, description="second")
    versions = [record, second, replace(second, status="failed")]
    for i, version in enumerate(versions):  # three rounds' worth, added while earlier ones run
        commit = store.prepare_owned([_owned(version, create=i == 0)])
        pipeline.add(commit, lambda c: done.append((c.writes[0].record.status, "", c.errors)))
        await asyncio.sleep(0)
    await pipeline.drain()
    assert [(status, errors) for status, _, errors in done] == [
        ("running", [None]),
        ("running", [None]),
        ("failed", [None]),
    ]
    on_disk = _disk(store, "a00000001")
    assert on_disk["status"] == "failed" and on_disk["description"] == "second"
    writer.close()
    late = store.prepare_owned([_owned(_record("a00000002"), create=True)])
    pipeline.add(late, lambda c: done.append(("late", "", c.errors)))
    await pipeline.drain()
    assert done[-1][0] == "late" and isinstance(done[-1][2][0], RuntimeError)
    assert store.get("a00000002") is None  # nothing unsynced was renamed into place


async def test_on_a_ram_file_system_a_commit_needs_no_thread_round(tmp_path: Path) -> None:
    """tmpfs has no disk to wait for: the commit is renamed into place as it is added; on a
    disk-backed folder it waits for the writer thread's sync round."""
    import asyncio
    import tempfile

    from subagents.store.pipeline import CommitPipeline

    ram = Path("/dev/shm")
    if not ram.is_dir() or atomic.needs_sync(os.stat(ram).st_dev):
        pytest.skip("no tmpfs at /dev/shm")
    loop, writer = asyncio.get_running_loop(), DurableWriter(name="test-ram")
    pipeline = CommitPipeline(writer=writer, loop=loop)
    done: list[str] = []
    with tempfile.TemporaryDirectory(dir=ram) as folder:
        store = FileStore(ProjectState(home=Path(folder) / "home", project=Path(PROJECT)))
        commit = store.prepare_owned([_owned(_record("a00000001"), create=True)])
        pipeline.add(commit, lambda c: done.append("ram"))
        assert done == ["ram"] and commit.errors == [None]
        assert store.get("a00000001") is not None and writer.stats.batches == 0
    disk = _store(tmp_path)
    if atomic.needs_sync(os.stat(tmp_path).st_dev):
        commit = disk.prepare_owned([_owned(_record("a00000002"), create=True)])
        pipeline.add(commit, lambda c: done.append("disk"))
        assert done == ["ram"]  # not yet: the sync round runs on the writer thread
        await pipeline.drain()
        assert done == ["ram", "disk"] and disk.get("a00000002") is not None
    writer.close()


def test_stop_requests_and_markers_without_mknod_or_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where mknod may not make regular files and hard links are refused, the markers and stop
    requests are plain exclusive files instead."""

    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EPERM, "not here")

    monkeypatch.setattr(os, "mknod", refused)
    monkeypatch.setattr(os, "link", refused)
    store = _store(tmp_path)
    assert _finish(store.prepare_owned([_owned(_record("a00000001"), create=True)])) == [None]
    path = store.sidecar_path("a00000001")
    assert path is not None and os.listdir(path.parent / ".running") == ["a00000001"]
    assert store.request_stop("a00000001").stop_requested
    assert store.stop_requested_ids(PROJECT) == {"a00000001"}
    assert os.stat(path.parent / ".stop" / "a00000001").st_mode & 0o777 == 0o600


def test_a_kill_right_after_the_rename_leaves_a_running_record_recovery_can_see(
    tmp_path: Path,
) -> None:
    """The running marker exists before the record is renamed into place: the kill window
    between the two (the crash harness once left two children ``running`` for good) is gone."""
    from subagents.store.atomic import publish_staged

    store = _store(tmp_path)
    records = [_record("a00000001"), _record("a00000002"), _record("a00000003")]
    commit = store.prepare_owned([_owned(r, create=True) for r in records])
    commit.sync()
    publish_staged(commit.staged, [None] * 3)  # the renames...
    first = commit.staged[0]
    commit.on_published(first.path, records[0], first)  # ...one record noted, then kill -9
    fresh = _store(tmp_path)
    assert [r.agent_id for r in fresh.list_running(PROJECT)] == [r.agent_id for r in records]


def test_a_marker_whose_record_never_appeared_is_dropped(tmp_path: Path) -> None:
    store = _store(tmp_path)
    commit = store.prepare_owned([_owned(_record("a00000001"), create=True)])
    commit.publish(failed=OSError(errno.EIO, "disk gone"))  # nothing renamed
    fresh = _store(tmp_path)
    assert fresh.list_running(PROJECT) == []
    running = fresh.state.agents_dir / ".running"
    assert not running.exists() or os.listdir(running) == []
