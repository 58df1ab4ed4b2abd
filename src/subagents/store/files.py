"""``FileStore``: sidecars as JSON files under the state folder (``agents/<id>.json``).

Each record lives in the folder of *its* project (``ProjectState(home, record.project_path)``),
so listing a project reads one directory and a project never sees another's runs; ``get`` looks
in the store's own project first and then in the other project folders of the same home (ids
are globally unique). Leases live in the store's own project folder: a run is leased through
the store of the project it belongs to.

Writers (``create``, ``update``, activity, leases) hold an exclusive ``flock`` on the folder's
``.store.lock`` for their read-modify-write, so processes sharing a state folder cannot lose
each other's updates; readers need no lock, because every write is an atomic replace
(``atomic.write_atomic``). A process-local ``RecordCache`` saves re-reading finished runs; each
hit is checked against the file's stat, so another process's write is never served stale.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from subagents.state import ProjectState
from subagents.store import leases
from subagents.store.activity import ActivityThrottle
from subagents.store.atomic import (
    FILE_MODE,
    ensure_private_tree,
    read_private,
    write_atomic,
)
from subagents.store.cache import DEFAULT_CAPACITY, RecordCache, Signature
from subagents.store.errors import (
    DuplicateAgentError,
    InvalidRecordError,
    StoreError,
    UnknownAgentError,
    UnsafePathError,
)
from subagents.store.migrations import load_record
from subagents.store.process_identity import ProcessIdentity, is_alive
from subagents.store.records import SidecarRecord, apply_changes

logger = logging.getLogger(__name__)

SIDECAR_SUFFIX = ".json"
LOCK_NAME = ".store.lock"
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def _signature(info: os.stat_result) -> Signature:
    return (info.st_ino, info.st_mtime_ns, info.st_size)


def check_agent_id(agent_id: str) -> str:
    """Ids become file names: refuse anything that could leave the folder (``../x``)."""
    if not _SAFE_ID.fullmatch(agent_id):
        raise InvalidRecordError(f"agent id {agent_id!r}: not a valid id (letters, digits, _-)")
    return agent_id


class FileStore:
    """The on-disk ``Store``: atomic ``0600`` sidecars in ``0700`` folders (see module doc)."""

    def __init__(
        self,
        state: ProjectState,
        *,
        clock: Callable[[], float] = time.time,
        cache_size: int = DEFAULT_CAPACITY,
        activity_interval: float = 1.0,
        alive: Callable[[ProcessIdentity], bool] = is_alive,
    ) -> None:
        self.state = state
        self._clock = clock
        self._alive = alive
        self.cache = RecordCache(cache_size)
        self._activity = ActivityThrottle(clock=clock, interval=activity_interval)
        self._paths: dict[str, Path] = {}
        self._mutex = threading.RLock()

    # -- Store protocol -------------------------------------------------------------------

    def create(self, record: SidecarRecord) -> None:
        check_agent_id(record.agent_id)
        folder = self._agents_dir(record.project_path)
        with self._locked(folder):
            if self._locate(record.agent_id) is not None:
                raise DuplicateAgentError(f"agent {record.agent_id} already has a record")
            path = folder / f"{record.agent_id}{SIDECAR_SUFFIX}"
            self._write(path, record)
            self._paths[record.agent_id] = path

    def get(self, agent_id: str) -> SidecarRecord | None:
        path = self._locate(check_agent_id(agent_id))
        return None if path is None else self._load(path)

    def update(self, agent_id: str, **changes: Any) -> SidecarRecord:
        path = self._require_path(agent_id)
        with self._locked(path.parent):
            current = self._require(agent_id, path)
            pending = self._activity.pending(agent_id)
            if pending is not None and "last_active_at" not in changes:
                changes["last_active_at"] = pending
            updated = apply_changes(current, changes, now=self._clock())
            self._write(path, updated)
            self._note_written(updated)
            return updated

    def list_agents(
        self, project_path: str | Path, *, session_id: str | None = None
    ) -> list[SidecarRecord]:
        project = str(project_path)
        folder = ProjectState(home=self.state.home, project=Path(project)).agents_dir
        found = [
            record
            for record in self._load_folder(folder)
            if record.project_path == project and session_id in (None, record.session_id)
        ]
        return sorted(found, key=lambda r: r.created_at)

    def touch_activity(self, agent_id: str) -> None:
        at = self._activity.touch(check_agent_id(agent_id))
        if at is None:
            return  # held; the next write of this record carries it
        path = self._require_path(agent_id)
        with self._locked(path.parent):
            current = self._require(agent_id, path)
            if current.is_terminal:
                self._activity.forget(agent_id)
                return
            updated = apply_changes(current, {"last_active_at": at}, now=at)
            self._write(path, updated)
            self._note_written(updated)

    def request_stop(self, agent_id: str) -> SidecarRecord:
        path = self._require_path(agent_id)
        with self._locked(path.parent):
            current = self._require(agent_id, path)
            if current.stop_requested or current.is_terminal:
                return current
            updated = apply_changes(current, {"stop_requested": True}, now=self._clock())
            self._write(path, updated)
            return updated

    def take_lease(self, agent_id: str, owner: ProcessIdentity) -> bool:
        path = self._lease_path(agent_id)
        with self._locked(path.parent):
            return leases.take_lease(path, owner, alive=self._alive)

    def release_lease(self, agent_id: str, owner: ProcessIdentity) -> None:
        path = self._lease_path(agent_id)
        with self._locked(path.parent):
            leases.release_lease(path, owner)

    # -- beyond the protocol --------------------------------------------------------------

    def flush_activity(self) -> None:
        """Write every held activity time now (call at shutdown)."""
        for agent_id in self._activity.pending_ids():
            try:
                self.update(agent_id)
            except StoreError as exc:
                logger.warning("activity flush for agent %s failed: %s", agent_id, exc)

    def sidecar_path(self, agent_id: str) -> Path | None:
        """Where the record of ``agent_id`` is stored, or None if it has none."""
        return self._locate(check_agent_id(agent_id))

    def lease_path(self, agent_id: str) -> Path:
        return self._lease_path(agent_id)

    # -- internals ------------------------------------------------------------------------

    def _agents_dir(self, project_path: str) -> Path:
        folder = ProjectState(home=self.state.home, project=Path(project_path)).agents_dir
        ensure_private_tree(self.state.home, folder)
        return folder

    def _lease_path(self, agent_id: str) -> Path:
        folder = self._agents_dir(str(self.state.project))
        return folder / f"{check_agent_id(agent_id)}{leases.LEASE_SUFFIX}"

    @contextmanager
    def _locked(self, folder: Path) -> Iterator[None]:
        """This process's mutex plus an exclusive ``flock`` shared with other processes."""
        with self._mutex:
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(folder / LOCK_NAME, flags, FILE_MODE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing releases the flock

    def _locate(self, agent_id: str) -> Path | None:
        name = f"{agent_id}{SIDECAR_SUFFIX}"
        known = self._paths.get(agent_id)
        candidates = [known] if known is not None else []
        candidates.append(self.state.agents_dir / name)
        projects = self.state.home / "projects"
        if projects.is_dir():
            candidates += [Path(e.path) / "agents" / name for e in os.scandir(projects)]
        for path in candidates:
            if os.path.lexists(path):
                self._paths[agent_id] = path
                return path
        return None

    def _require_path(self, agent_id: str) -> Path:
        path = self._locate(check_agent_id(agent_id))
        if path is None:
            raise UnknownAgentError(f"no record for agent {agent_id}")
        return path

    def _require(self, agent_id: str, path: Path) -> SidecarRecord:
        record = self._load(path)
        if record is None:
            raise UnknownAgentError(f"no record for agent {agent_id} ({path} is gone)")
        return record

    def _load(self, path: Path) -> SidecarRecord | None:
        """The record at ``path`` (cached while its file is unchanged); None if missing."""
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(info.st_mode):
            raise UnsafePathError(f"{path}: sidecar is a symlink; refusing to read it")
        agent_id = path.name.removesuffix(SIDECAR_SUFFIX)
        with self._mutex:
            cached = self.cache.get(agent_id, _signature(info))
        if cached is not None:
            return cached
        found = read_private(path)
        if found is None:
            return None
        record = self._parse(path, found[0])
        with self._mutex:
            self.cache.put(record, _signature(found[1]))
        return record

    @staticmethod
    def _parse(path: Path, data: bytes) -> SidecarRecord:
        try:
            raw = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidRecordError(f"{path}: sidecar is not valid JSON: {exc}") from exc
        record = load_record(raw, source=str(path))
        if f"{record.agent_id}{SIDECAR_SUFFIX}" != path.name:
            raise InvalidRecordError(f"{path}: agentId {record.agent_id!r} does not match file")
        return record

    def _load_folder(self, folder: Path) -> Iterator[SidecarRecord]:
        """Every readable sidecar in ``folder``; unsafe or corrupt ones are logged, not fatal,
        so one planted or damaged file cannot hide a project's other runs."""
        if not folder.is_dir():
            return
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if entry.name.startswith(".") or not entry.name.endswith(SIDECAR_SUFFIX):
                continue  # lock file, leftover temp files of an interrupted write, leases
            try:
                record = self._load(Path(entry.path))
            except StoreError as exc:
                logger.warning("skipping sidecar: %s", exc)
                continue
            if record is not None:
                self._paths[record.agent_id] = Path(entry.path)
                yield record

    def _write(self, path: Path, record: SidecarRecord) -> None:
        data = json.dumps(record.to_dict(), indent=2).encode() + b"\n"
        info = write_atomic(path, data)
        with self._mutex:
            self.cache.put(record, _signature(info))

    def _note_written(self, record: SidecarRecord) -> None:
        if record.is_terminal:
            self._activity.forget(record.agent_id)
        else:
            self._activity.written(record.agent_id, record.last_active_at)
