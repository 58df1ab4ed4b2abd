"""FileStore on real files: modes, atomic writes across a real crash, symlinks, cache bounds,
activity coalescing, process identity, old schema versions and the public view."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from subagents.state import ProjectState
from subagents.store import (
    FileStore,
    InvalidRecordError,
    ProcessIdentity,
    SchemaVersionError,
    SidecarRecord,
    UnsafePathError,
    WorktreeInfo,
    current_identity,
    is_alive,
    is_visible,
    load_record,
    migrate,
    public_view,
)
from subagents.store.atomic import write_atomic
from subagents.store.cache import RecordCache
from subagents.store.process_identity import pid_exists, start_identity
from subagents.testing.store_conformance import make_record

FIXTURES = Path(__file__).parent / "fixtures" / "sidecars"
PROJECT = "/srv/project"


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _store(tmp_path: Path, **kwargs: object) -> FileStore:
    state = ProjectState(home=tmp_path / "home", project=Path(PROJECT))
    return FileStore(state, **kwargs)  # type: ignore[arg-type]


def _record(agent_id: str, **overrides: Any) -> SidecarRecord:
    return make_record(agent_id, project_path=PROJECT, **overrides)


def _on_disk(store: FileStore, agent_id: str) -> dict[str, object]:
    path = store.sidecar_path(agent_id)
    assert path is not None
    return json.loads(path.read_text())  # type: ignore[no-any-return]


# -- modes -----------------------------------------------------------------------------------


def test_files_0600_and_every_state_directory_0700(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create(_record("a00000001"))
    path = store.sidecar_path("a00000001")
    assert path is not None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    home = tmp_path / "home"
    for folder in (home, home / "projects", path.parent.parent, path.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    store.take_lease("a00000001", current_identity())
    assert stat.S_IMODE(store.lease_path("a00000001").stat().st_mode) == 0o600


def test_existing_loose_directories_are_tightened(tmp_path: Path) -> None:
    store = _store(tmp_path)
    agents = store.state.agents_dir
    agents.mkdir(parents=True)
    for folder in (tmp_path / "home", agents.parent, agents):
        folder.chmod(0o755)
    store.create(_record("a00000001"))
    for folder in (tmp_path / "home", agents.parent, agents):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_files_stay_0600_under_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        store = _store(tmp_path)
        store.create(_record("a00000001"))
        store.update("a00000001", description="again")
    finally:
        os.umask(old)
    path = store.sidecar_path("a00000001")
    assert path is not None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# -- atomic writes ---------------------------------------------------------------------------

_CRASH_SCRIPT = """
import os, sys
from pathlib import Path
from subagents.state import ProjectState
from subagents.store import FileStore
store = FileStore(ProjectState(home=Path(sys.argv[1]), project=Path(sys.argv[2])))
os.rename = lambda *a, **k: os.kill(os.getpid(), 9)  # die between fsync and rename
store.update("a00000001", description="never visible")
"""


def test_a_real_crash_mid_write_leaves_the_old_record_and_an_ignored_temp(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create(_record("a00000001", description="before"))
    crashed = subprocess.run(
        [sys.executable, "-c", _CRASH_SCRIPT, str(tmp_path / "home"), PROJECT], check=False
    )
    assert crashed.returncode == -signal.SIGKILL
    leftovers = [p.name for p in store.state.agents_dir.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) == 1
    assert "never visible" in (store.state.agents_dir / leftovers[0]).read_text()
    fresh = _store(tmp_path)
    record = fresh.get("a00000001")
    assert record is not None and record.description == "before"
    assert [r.agent_id for r in fresh.list_agents(PROJECT)] == ["a00000001"]
    assert fresh.update("a00000001", description="after").description == "after"


def test_failed_write_removes_its_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    store.create(_record("a00000001", description="before"))

    def fail(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "rename", fail)
    with pytest.raises(OSError, match="No space"):
        store.update("a00000001", description="lost")
    monkeypatch.undo()
    assert not [p for p in store.state.agents_dir.iterdir() if p.name.endswith(".tmp")]
    record = _store(tmp_path).get("a00000001")
    assert record is not None and record.description == "before"


# -- symlinks --------------------------------------------------------------------------------


def test_sidecar_symlink_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create(_record("a00000001"))
    path = store.sidecar_path("a00000001")
    assert path is not None
    target = tmp_path / "victim.json"
    target.write_text(path.read_text())
    path.unlink()
    path.symlink_to(target)
    fresh = _store(tmp_path)
    with pytest.raises(UnsafePathError, match="symlink"):
        fresh.get("a00000001")
    with pytest.raises(UnsafePathError, match="symlink"):
        fresh.update("a00000001", description="through the link")
    assert "through the link" not in target.read_text()
    assert fresh.list_agents(PROJECT) == []  # skipped (and logged), not fatal


def test_write_atomic_refuses_a_symlink_target(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("keep")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(UnsafePathError):
        write_atomic(tmp_path / "link", b"overwrite")
    assert target.read_text() == "keep"


def test_lease_symlink_is_refused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    lease = store.lease_path("a00000001")
    lease.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafePathError):
        store.take_lease("a00000001", current_identity())
    assert not (tmp_path / "elsewhere").exists()


def test_agent_ids_cannot_leave_the_folder(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with pytest.raises(InvalidRecordError, match="not a valid id"):
        store.get("../../etc/passwd")
    with pytest.raises(InvalidRecordError, match="not a valid id"):
        store.create(_record("../a"))


# -- cache -----------------------------------------------------------------------------------


def test_cache_keeps_at_most_256_terminal_and_every_running(tmp_path: Path) -> None:
    store = _store(tmp_path)
    running = [f"r{n:08d}" for n in range(20)]
    for agent_id in running:
        store.create(_record(agent_id))
    for n in range(300):
        store.create(_record(f"t{n:08d}", status="completed"))
    assert store.cache.terminal_count == 256
    assert all(agent_id in store.cache for agent_id in running)
    assert len(store.cache) == 256 + 20
    assert "t00000000" not in store.cache and "t00000299" in store.cache
    assert len(store.list_agents(PROJECT)) == 320  # evicted ones are still on disk
    assert store.cache.terminal_count == 256


def test_cache_evicts_least_recently_used_terminal() -> None:
    cache = RecordCache(2)
    sig = (1, 1, 1)
    cache.put(_record("a1", status="completed"), sig)
    cache.put(_record("a2", status="failed"), sig)
    cache.put(_record("a3"), sig)  # running: does not count
    assert cache.get("a1", sig) is not None  # a1 now more recent than a2
    cache.put(_record("a4", status="killed"), sig)
    assert "a2" not in cache
    assert all(agent_id in cache for agent_id in ("a1", "a3", "a4"))
    assert cache.get("a1", (9, 9, 9)) is None  # a changed file is never served from cache


def test_another_process_write_is_not_served_stale(tmp_path: Path) -> None:
    first, second = _store(tmp_path), _store(tmp_path)
    first.create(_record("a00000001", status="completed"))
    assert first.get("a00000001") is not None  # cached now
    second.update("a00000001", notified=True)
    seen = first.get("a00000001")
    assert seen is not None and seen.notified


# -- activity coalescing -----------------------------------------------------------------


def test_activity_written_at_most_once_per_second_and_flushed_at_terminal(tmp_path: Path) -> None:
    clock = FakeClock(100.0)
    store = _store(tmp_path, clock=clock)
    store.create(_record("a00000001", created_at=50.0))
    path = store.sidecar_path("a00000001")
    assert path is not None

    def disk_time() -> object:
        return json.loads(path.read_text())["lastActiveAt"]

    writes: list[object] = []
    for now in (100.0, 100.3, 100.6, 100.99, 101.1, 101.5, 101.7):
        clock.now = now
        store.touch_activity("a00000001")
        writes.append(disk_time())
    assert writes == [100.0, 100.0, 100.0, 100.0, 101.1, 101.1, 101.1]
    clock.now = 105.0
    done = store.update("a00000001", status="completed")
    assert done.last_active_at == 101.7  # the held touch rides on the terminal write
    assert disk_time() == 101.7 and done.ended_at == 105.0
    store.touch_activity("a00000001")
    assert disk_time() == 101.7


def test_flush_activity_writes_held_times(tmp_path: Path) -> None:
    clock = FakeClock(10.0)
    store = _store(tmp_path, clock=clock)
    store.create(_record("a00000001", created_at=1.0))
    store.touch_activity("a00000001")
    clock.now = 10.5
    store.touch_activity("a00000001")
    assert _on_disk(store, "a00000001")["lastActiveAt"] == 10.0
    store.flush_activity()
    assert _on_disk(store, "a00000001")["lastActiveAt"] == 10.5


# -- process identity ------------------------------------------------------------------------


def test_current_process_is_alive_and_a_reused_pid_is_not() -> None:
    me = current_identity()
    assert me.start_identity is not None
    assert is_alive(me)
    reused = ProcessIdentity(pid=me.pid, start_identity="1@another-boot", hostname=me.hostname)
    assert not is_alive(reused)


def test_exited_and_zombie_processes_are_not_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    identity = ProcessIdentity(pid=child.pid, start_identity=start_identity(child.pid))
    assert identity.start_identity is not None
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not pid_exists(child.pid)  # a zombie, not yet reaped
    assert not is_alive(identity)
    child.wait()
    assert not is_alive(identity)


def test_start_identity_parses_names_with_parentheses(tmp_path: Path) -> None:
    odd = tmp_path / "x) 1 2 (y"
    odd.symlink_to(shutil.which("sleep") or "/bin/sleep")
    child = subprocess.Popen([str(odd), "30"])
    try:
        theirs = start_identity(child.pid)
        mine = current_identity().start_identity
        assert theirs is not None and mine is not None
        assert theirs.split("@")[1:] == mine.split("@")[1:]  # same boot id
        assert int(theirs.split("@")[0]) >= int(mine.split("@")[0])  # started after us
        assert is_alive(ProcessIdentity(pid=child.pid, start_identity=theirs))
    finally:
        child.kill()
        child.wait()


def test_legacy_identity_without_start_time_uses_a_conservative_window() -> None:
    me = ProcessIdentity(pid=os.getpid())
    clock = FakeClock(10_000.0)
    assert is_alive(me, recorded_at=9_900.0, clock=clock)
    assert not is_alive(me, recorded_at=9_000.0, clock=clock)  # older than 10 min
    assert not is_alive(me)  # age unknown
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not is_alive(ProcessIdentity(pid=child.pid), recorded_at=9_999.0, clock=clock)


def test_another_hosts_process_counts_as_alive() -> None:
    assert is_alive(ProcessIdentity(pid=1, start_identity="x", hostname="elsewhere.invalid"))


def test_stale_lease_of_a_reused_pid_is_taken_over_on_disk(tmp_path: Path) -> None:
    store = _store(tmp_path)
    me = current_identity()
    ghost = ProcessIdentity(pid=me.pid, start_identity="0@old-boot", hostname=me.hostname)
    assert store.take_lease("a00000001", ghost)
    assert store.take_lease("a00000001", me)
    held = json.loads(store.lease_path("a00000001").read_text())
    assert held["startIdentity"] == me.start_identity
    assert not _store(tmp_path).take_lease("a00000001", ghost)


# -- schema versions -------------------------------------------------------------------------


def test_v1_fixture_migrates() -> None:
    raw = json.loads((FIXTURES / "v1_completed.json").read_text())
    assert migrate(raw, source="v1")["schemaVersion"] == 2
    record = load_record(raw, source="v1_completed.json")
    assert record.agent_id == "a1v1done0" and record.status == "completed"
    assert record.result.text == "It is loaded in src/config.py."
    assert record.lineage.root_agent_id == "a1v1done0" and record.lineage.resume_depth == 0
    assert record.config.model == "claude-haiku-4-5"
    assert record.ended_at == 1764400042.25 and record.process is None
    assert record.notified and not record.resumable


def test_v1_fixture_without_version_key_and_cancelled_status() -> None:
    raw = json.loads((FIXTURES / "v1_cancelled_no_version.json").read_text())
    record = load_record(raw, source="v1_cancelled_no_version.json")
    assert record.status == "killed" and record.result.error == "stopped by user"


def test_v2_fixture_loads_and_round_trips() -> None:
    raw = json.loads((FIXTURES / "v2_completed.json").read_text())
    record = load_record(raw, source="v2_completed.json")
    assert record.lineage.resumed_from == "a2v2root0" and record.lineage.resume_depth == 1
    assert record.config.tools == ("Read", "Edit", "Bash")
    assert record.stats.usage.cache_read_input_tokens == 45
    assert record.to_dict() == raw


def test_old_fixtures_load_through_the_file_store_and_upgrade_on_write(tmp_path: Path) -> None:
    store = _store(tmp_path)
    folder = store.state.agents_dir
    folder.mkdir(parents=True)
    for name, agent_id in (("v1_completed.json", "a1v1done0"), ("v2_completed.json", "a2v2done0")):
        raw = json.loads((FIXTURES / name).read_text())
        raw["project_path" if "agent_id" in raw else "projectPath"] = PROJECT
        (folder / f"{agent_id}.json").write_text(json.dumps(raw))
    assert [r.agent_id for r in store.list_agents(PROJECT)] == ["a1v1done0", "a2v2done0"]
    store.update("a1v1done0", notified=True)
    assert _on_disk(store, "a1v1done0")["schemaVersion"] == 2


def test_future_version_names_file_and_version(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create(_record("a00000001"))
    path = store.sidecar_path("a00000001")
    assert path is not None
    data = json.loads(path.read_text())
    data["schemaVersion"] = 3
    path.write_text(json.dumps(data))
    with pytest.raises(SchemaVersionError, match=r"a00000001\.json.*version 3"):
        _store(tmp_path).get("a00000001")


def test_corrupt_sidecar_names_the_file(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create(_record("a00000001"))
    path = store.sidecar_path("a00000001")
    assert path is not None
    path.write_text('{"schemaVersion": 2, "agentId": ')
    with pytest.raises(InvalidRecordError, match=r"a00000001\.json.*not valid JSON"):
        _store(tmp_path).get("a00000001")


def test_wrong_field_type_names_the_field() -> None:
    raw = json.loads((FIXTURES / "v2_completed.json").read_text())
    raw["stats"]["numTurns"] = "four"
    with pytest.raises(InvalidRecordError, match=r"f\.json: sidecar\.stats\.numTurns"):
        load_record(raw, source="f.json")


# -- public view -----------------------------------------------------------------------------


def test_public_view_omits_private_parts() -> None:
    raw = json.loads((FIXTURES / "v2_completed.json").read_text())
    record = load_record(raw, source="v2")
    view = public_view(record)
    for key in ("prompt", "config", "projectPath", "process", "transcriptPath", "worktree"):
        assert key not in view
    text = json.dumps(view)
    for secret in ("Make tests/test_io.py", "You fix tests.", "fixer.md", '"/home/dev/project"'):
        assert secret not in text
    assert view["worktreePath"] == record.worktree.path  # type: ignore[union-attr]
    assert view["worktreeBranch"] == "agent-a2v2done"
    assert view["result"]["text"].startswith("Fixed")
    assert view["lineage"]["resumeDepth"] == 1


def test_public_view_of_running_record_has_no_process_or_removed_worktree() -> None:
    record = _record("a00000001", worktree=WorktreeInfo(path="/w/a", branch="b", outcome="removed"))
    view = public_view(record)
    assert "worktreePath" not in view and "process" not in view
    assert "startIdentity" not in json.dumps(view) and "hostname" not in json.dumps(view)


def test_records_land_in_their_own_project_folder(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create(make_record("b00000001", project_path="/srv/other"))
    path = store.sidecar_path("b00000001")
    other = ProjectState(home=tmp_path / "home", project=Path("/srv/other"))
    assert path == other.agents_dir / "b00000001.json"
    assert store.list_agents(PROJECT) == []


_WRITER_SCRIPT = """
import sys
from pathlib import Path
from subagents.state import ProjectState
from subagents.store import FileStore, RunResult
store = FileStore(ProjectState(home=Path(sys.argv[1]), project=Path(sys.argv[2])))
for n in range(40):
    if sys.argv[3] == "description":
        store.update("a00000001", description=f"d{n}")
    else:
        store.update("a00000001", result=RunResult(text=f"r{n}"))
"""


def test_concurrent_writers_in_two_processes_lose_no_update(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create(_record("a00000001"))
    home = str(tmp_path / "home")
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER_SCRIPT, home, PROJECT, field])
        for field in ("description", "result")
    ]
    assert [w.wait(timeout=60) for w in writers] == [0, 0]
    final = _store(tmp_path).get("a00000001")
    assert final is not None
    assert (final.description, final.result.text) == ("d39", "r39")


def test_public_names_are_pinned() -> None:
    import subagents.store as store_pkg

    assert {"Store", "MemoryStore", "FileStore", "SidecarRecord", "public_view"} <= set(
        store_pkg.__all__
    )
    assert all(hasattr(store_pkg, name) for name in store_pkg.__all__)


def test_visibility_needs_same_session_and_project() -> None:
    record = _record("a00000001", session_id="s1")
    assert is_visible(record, session_id="s1", project_path=PROJECT)
    assert not is_visible(record, session_id="s1", project_path="/srv/elsewhere")
    assert not is_visible(record, session_id="s2", project_path=PROJECT)
