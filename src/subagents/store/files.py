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

``apply_batch`` runs many record operations as one group commit (``atomic.commit_writes``): the
``DurableWriter`` hands over everything queued at once, so a fan-out of children pays one
``syncfs`` per batch instead of two ``fsync`` calls per record. Every single-operation method is
a batch of one, so both paths share one implementation.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from subagents.state import ProjectState
from subagents.store import leases
from subagents.store.activity import ActivityThrottle
from subagents.store.atomic import (
    FILE_MODE,
    StagedWrite,
    commit_writes,
    ensure_private_tree,
    fsync_dir,
    needs_sync,
    publish_staged,
    read_private,
    release_fd,
    stage_write,
    sync_renamed,
    sync_staged,
)
from subagents.store.cache import DEFAULT_CAPACITY, RecordCache, Signature
from subagents.store.capabilities import (
    BATCHABLE_OPS,
    BatchOp,
    BatchOutcome,
    OwnedWrite,
    encode_record,
)
from subagents.store.errors import (
    DuplicateAgentError,
    InvalidRecordError,
    StoreError,
    UnknownAgentError,
    UnsafePathError,
)
from subagents.store.migrations import load_record
from subagents.store.process_identity import ProcessIdentity, is_alive
from subagents.store.records import TERMINAL_STATUSES, SidecarRecord, apply_changes

logger = logging.getLogger(__name__)

SIDECAR_SUFFIX = ".json"
RUNNING_DIR = ".running"
SPARE_DIR = ".spare"
SPARE_LIMIT = 64
"""Spare files kept per agents folder (``FileStore._retire_marker``)."""
STOP_DIR = ".stop"
LOCK_NAME = ".store.lock"
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


@dataclass
class _Staged:
    """The latest version of one record in a batch, and the ops whose success depends on it."""

    path: Path
    record: SidecarRecord
    ops: list[int]


@dataclass(kw_only=True)
class FileCommit:
    """One group commit of owner writes to files, split at its two waits (``prepare_owned``;
    the ``capabilities.OwnerCommit`` of ``FileStore``).

    ``sync`` and ``sync_renamed`` may block on the disk: run them on a thread. ``publish`` is
    a handful of fast system calls per record: run it where the records were staged (the event
    loop). Keeping the thread's part to one or two system calls per batch matters: each call a
    thread makes releases and retakes the GIL, and with the event loop busy every such handoff
    costs both threads far more CPU than the call itself (measured: 85 µs per record written on
    the thread against ~30 µs inline).
    """

    writes: list[OwnedWrite]
    staged: list[StagedWrite]
    errors: list[BaseException | None]
    """One per entry of ``writes``; ``staged`` holds only those whose staging succeeded."""
    on_published: Callable[[str, SidecarRecord, StagedWrite], None]
    """The store's note of a record now in place (its cache, activity and running marker)."""
    _staged_index: list[int] = field(default_factory=list)
    _published: bool = False

    @property
    def needs_sync(self) -> bool:
        """Whether any write is on a file system with a disk to wait for (not tmpfs)."""
        # Per file system, not per write: a commit of a thousand records is one or two devices.
        return any(needs_sync(device) for device in {write.info.st_dev for write in self.staged})

    def sync(self) -> None:
        """On a thread: make the staged data durable (one ``syncfs`` for the batch)."""
        errors = [self.errors[i] for i in self._staged_index]
        sync_staged(self.staged, errors)
        for i, error in zip(self._staged_index, errors, strict=True):
            self.errors[i] = error

    def publish(self, *, failed: BaseException | None = None) -> None:
        """Rename every synced record into place and update the store's memory of it;
        ``failed``: the sync step itself failed, so nothing is renamed."""
        if self._published:
            return
        self._published = True
        errors = [failed or self.errors[i] for i in self._staged_index]
        publish_staged(self.staged, errors)
        for i, staged, error in zip(self._staged_index, self.staged, errors, strict=True):
            self.errors[i] = error
            if error is None:
                self.on_published(staged.path, self.writes[i].record, staged)

    def fail(self, error: BaseException) -> None:
        """Mark every write that has not failed yet as failed with ``error`` (its renames may
        have happened, but are not known durable)."""
        self.errors[:] = [e or error for e in self.errors]

    def sync_renamed(self) -> None:
        """On a thread: make the renames durable (one directory ``fsync`` per folder)."""
        errors = [self.errors[i] for i in self._staged_index]
        sync_renamed(self.staged, errors)
        for i, error in zip(self._staged_index, errors, strict=True):
            self.errors[i] = error


def sync_renamed_together(commits: Sequence[FileCommit]) -> None:
    """On a thread: ``sync_renamed`` of several commits at once, one directory ``fsync`` per
    folder among them all. A sync round with renames only (no staged descriptor left for a
    ``syncfs``) opened, ``fsync``-ed and closed the folder once per commit — the same agents
    folder each time, as a rule; one ``fsync`` after all their renames makes each durable, and
    a failure fails every write renamed into that folder, as it would have failed each."""
    staged = [write for commit in commits for write in commit.staged]
    errors = [commit.errors[i] for commit in commits for i in commit._staged_index]
    sync_renamed(staged, errors)
    outcomes = iter(errors)
    for commit in commits:
        for i in commit._staged_index:
            commit.errors[i] = next(outcomes)


def _signature(info: os.stat_result) -> Signature:
    return (info.st_ino, info.st_mtime_ns, info.st_size)


def check_agent_id(agent_id: str) -> str:
    """Ids become file names: refuse anything that could leave the folder (``../x``)."""
    if not _SAFE_ID.fullmatch(agent_id):
        raise InvalidRecordError(f"agent id {agent_id!r}: not a valid id (letters, digits, _-)")
    return agent_id


class FileStore:
    """The on-disk ``Store``: atomic ``0600`` sidecars in ``0700`` folders (see module doc)."""

    batchable_ops = BATCHABLE_OPS

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
        self._marked: set[str] = set()
        self._marker_dirs: set[str] = set()
        self._spares: dict[str, list[str]] = {}  # agents folder -> its spare files
        self._spare_dirs: set[str] = set()
        self._owned_folders: dict[str, str] = {}  # project path -> agents folder (owner writes)
        self._folders: dict[str, Path] = {}  # project path -> its agents folder, made private
        self._writing = threading.RLock()  # writers of this process, one at a time
        self._mutex = threading.Lock()  # the cache; held briefly, so readers never wait on I/O

    # -- Store protocol -------------------------------------------------------------------

    def create(self, record: SidecarRecord) -> None:
        self._one(BatchOp("create", (record,)))

    def get(self, agent_id: str) -> SidecarRecord | None:
        path = self._locate(check_agent_id(agent_id))
        return None if path is None else self._load(path)

    def update(self, agent_id: str, **changes: Any) -> SidecarRecord:
        updated: SidecarRecord = self._one(BatchOp("update", (agent_id,), changes))
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
        self._one(BatchOp("touch_activity", (agent_id,)))

    def request_stop(self, agent_id: str) -> SidecarRecord:
        record: SidecarRecord = self._one(BatchOp("request_stop", (agent_id,)))
        return record

    def take_lease(self, agent_id: str, owner: ProcessIdentity) -> bool:
        path = self._lease_path(agent_id)
        with self._locked([path.parent]):
            return leases.take_lease(path, owner, alive=self._alive)

    def release_lease(self, agent_id: str, owner: ProcessIdentity) -> None:
        path = self._lease_path(agent_id)
        with self._locked([path.parent]):
            leases.release_lease(path, owner)

    # -- group commit ---------------------------------------------------------------------

    def apply_batch(self, ops: Sequence[BatchOp]) -> list[BatchOutcome]:
        """Run ``ops`` in order as one group commit; one outcome per op, in order.

        Each op is computed against the latest version of its record — including versions
        staged by earlier ops of this batch — then every changed record is written once (its
        final version) by ``atomic.commit_writes``. An op that is refused (unknown id, terminal
        status, invalid field) fails alone; a record whose write fails fails every op that
        changed it. Outcomes are known only once the writes are durable.
        """
        outcomes = [BatchOutcome() for _ in ops]
        with self._writing:
            staged: dict[str, _Staged] = {}
            with self._locked(self._batch_folders(ops)):
                for index, op in enumerate(ops):
                    try:
                        outcomes[index].value = self._stage(op, index, staged)
                    except Exception as exc:
                        outcomes[index].error = exc
                self._commit(list(staged.values()), outcomes)
        return outcomes

    def _one(self, op: BatchOp) -> Any:
        outcome = self.apply_batch([op])[0]
        if outcome.error is not None:
            raise outcome.error
        return outcome.value

    # -- owner writes -----------------------------------------------------------------------

    def prepare_owned(self, writes: Sequence[OwnedWrite]) -> FileCommit:
        """Stage the records of running children written by their single owner.

        While a child runs, the session that owns it is the only writer of its sidecar: other
        processes never rewrite it (``request_stop`` creates a separate file, recovery waits
        for the owner to be gone and takes a lease). So an owner write needs no read-modify-
        write and no lock, and the owner has already applied the store rules to its in-memory
        copy (``records.apply_changes``). This stages every record (temp file written, not yet
        durable) and returns the commit to finish: ``sync`` → ``publish`` → ``sync_renamed``.
        A new record (``create``) must not exist yet; a failure fails that write alone.
        """
        commit = FileCommit(
            writes=list(writes), staged=[], errors=[], on_published=self._remember_written
        )
        devices: set[int] = set()
        for index, write in enumerate(commit.writes):
            try:
                staged = self._stage_owned(write)
            except Exception as exc:
                commit.errors.append(exc)
                continue
            commit.errors.append(None)
            commit.staged.append(staged)
            commit._staged_index.append(index)
            if staged.info.st_dev in devices:
                release_fd(staged)  # one open descriptor per file system serves ``syncfs``
            devices.add(staged.info.st_dev)
        return commit

    def _stage_owned(self, write: OwnedWrite) -> StagedWrite:
        record = write.record
        agent_id = record.agent_id
        if agent_id not in self._marked:  # (a marked id was checked at its first write)
            check_agent_id(agent_id)
        folder = self._owned_folders.get(record.project_path)
        if folder is None:
            folder = self._owned_folders[record.project_path] = str(
                self._agents_dir(record.project_path)
            )
        # Strings, not Paths: pathlib parsing cost as much as the system calls here.
        path = f"{folder}/{agent_id}{SIDECAR_SUFFIX}"
        # ``os.path.lexists`` without its ``FileNotFoundError`` (raised and caught for every new
        # record: 7.6 k instructions, against 1.4 k for ``access``, which answers the same —
        # whether anything, a dangling symlink too, has that name — without raising).
        if write.create and os.access(path, os.F_OK, follow_symlinks=False):
            raise DuplicateAgentError(f"agent {agent_id} already has a record")
        # No symlink check: the rename replaces whatever sits at ``path`` (a planted symlink
        # included) rather than writing through it.
        pool = self._spares.get(folder)
        spare = pool.pop() if pool else None
        staged = stage_write(path, write.data, target_checked=True, reuse=spare)
        # (``_premark``'s own early return in line: a terminal write, or a running one whose
        # marker is linked already, calls nothing)
        if agent_id not in self._marked and record.status not in TERMINAL_STATUSES:
            self._premark(folder, record, staged.temp)
        return staged

    def _remember_written(self, path: str, record: SidecarRecord, staged: StagedWrite) -> None:
        # The status read once: the cache, the throttle and the marker each asked
        # ``is_terminal`` (a property, so a Python call each) at every write.
        terminal = record.status in TERMINAL_STATUSES
        info = staged.info
        with self._mutex:  # (``_signature`` in line)
            self.cache.put(record, (info.st_ino, info.st_mtime_ns, info.st_size), terminal)
        agent_id = record.agent_id
        if terminal:
            self._activity.forget(agent_id)
        else:
            self._activity.written(agent_id, record.last_active_at)
            if agent_id in self._marked:
                return  # (``_mark``'s own early return in line: its marker is linked already)
        cut = path.rfind("/")  # ``os.path.dirname`` without its Python call, for "<folder>/<id>"
        self._mark(path[:cut] if cut > 0 else os.path.dirname(path), record, terminal)

    def _batch_folders(self, ops: Sequence[BatchOp]) -> list[Path]:
        """Every folder the batch writes in, so all their locks are taken up front (sorted).

        An op whose folder cannot be found here (bad id, unknown record) is skipped: staging
        it raises the same error again, for that op alone."""
        folders: set[Path] = set()
        created: set[str] = set()
        for op in ops:
            try:
                folder = self._op_folder(op, created)
            except (StoreError, OSError):
                continue
            if folder is not None:
                folders.add(folder)
        return sorted(folders)

    def _op_folder(self, op: BatchOp, created: set[str]) -> Path | None:
        target = op.args[0] if op.args else None
        if op.name == "create" and isinstance(target, SidecarRecord):
            created.add(check_agent_id(target.agent_id))
            return self._agents_dir(target.project_path)
        if isinstance(target, str) and target not in created:
            path = self._paths.get(check_agent_id(target)) or self._locate(target)
            return None if path is None else path.parent
        return None

    def _stage(self, op: BatchOp, index: int, staged: dict[str, _Staged]) -> object:
        args, kwargs = op.args, op.kwargs
        match op.name:
            case "create":
                self._stage_create(staged, index, *args, **kwargs)
                return None
            case "update":
                return self._stage_update(staged, index, *args, **kwargs)
            case "touch_activity":
                self._stage_touch_activity(staged, index, *args, **kwargs)
                return None
            case "request_stop":
                return self._stage_request_stop(staged, index, *args, **kwargs)
        raise StoreError(f"FileStore.apply_batch: {op.name!r} is not a batchable operation")

    def _stage_create(self, staged: dict[str, _Staged], index: int, record: SidecarRecord) -> None:
        agent_id = check_agent_id(record.agent_id)
        path = self._agents_dir(record.project_path) / f"{agent_id}{SIDECAR_SUFFIX}"
        known = self._paths.get(agent_id)
        if (
            agent_id in staged
            or os.path.lexists(path)
            or (known is not None and os.path.lexists(known))
        ):
            raise DuplicateAgentError(f"agent {agent_id} already has a record")
        staged[agent_id] = _Staged(path=path, record=record, ops=[index])

    def _stage_update(
        self, staged: dict[str, _Staged], index: int, agent_id: str, **changes: Any
    ) -> SidecarRecord:
        path, current = self._current(staged, agent_id)
        pending = self._activity.pending(agent_id)
        if pending is not None and "last_active_at" not in changes:
            changes["last_active_at"] = pending
        updated = apply_changes(current, changes, now=self._clock())
        return self._put(staged, index, path, updated)

    def _stage_touch_activity(self, staged: dict[str, _Staged], index: int, agent_id: str) -> None:
        at = self._activity.touch(check_agent_id(agent_id))
        if at is None:
            return  # held; the next write of this record carries it
        path, current = self._current(staged, agent_id)
        if current.is_terminal:
            self._activity.forget(agent_id)
            return
        self._put(staged, index, path, apply_changes(current, {"last_active_at": at}, now=at))

    def _stage_request_stop(
        self, staged: dict[str, _Staged], index: int, agent_id: str
    ) -> SidecarRecord:
        """A stop request is its own file (``agents/.stop/<id>``), never a rewrite of the
        sidecar: the running child's owner is the sidecar's only writer (``prepare_owned``), so
        a flag written into it by another process could be lost under the owner's next write.
        ``_load`` shows the flag on the record of a running child while the file exists."""
        path, current = self._current(staged, agent_id)
        if current.stop_requested or current.is_terminal:
            return current
        marker = path.parent / STOP_DIR / current.agent_id
        ensure_private_tree(self.state.home, marker.parent)
        _make_marker(str(marker))
        fsync_dir(marker.parent)
        return replace(current, stop_requested=True)

    def _current(self, staged: dict[str, _Staged], agent_id: str) -> tuple[Path, SidecarRecord]:
        """The record as this batch has left it so far, else as stored."""
        entry = staged.get(agent_id)
        if entry is not None:
            return entry.path, self._with_stop_request(entry.path, entry.record)
        # A known path is trusted without a stat: records never move, and ``_require`` lstats
        # it anyway (refusing a symlink, reporting a vanished file).
        path = self._paths.get(check_agent_id(agent_id)) or self._require_path(agent_id)
        return path, self._require(agent_id, path)

    @staticmethod
    def _put(
        staged: dict[str, _Staged], index: int, path: Path, record: SidecarRecord
    ) -> SidecarRecord:
        entry = staged.get(record.agent_id)
        if entry is None:
            staged[record.agent_id] = _Staged(path=path, record=record, ops=[index])
        else:
            entry.record = record
            entry.ops.append(index)
        return record

    def _commit(self, entries: list[_Staged], outcomes: list[BatchOutcome]) -> None:
        """Write each staged record's final version durably; fail the ops of any that fail."""
        writes: list[tuple[_Staged, StagedWrite]] = []
        for entry in entries:
            try:
                data = encode_record(entry.record)
                write = stage_write(str(entry.path), data, target_checked=True)
                self._premark(str(entry.path.parent), entry.record, write.temp)
                writes.append((entry, write))
            except Exception as exc:
                self._fail(entry, exc, outcomes)
        errors = commit_writes([write for _, write in writes])
        for (entry, write), error in zip(writes, errors, strict=True):
            if error is not None:
                self._fail(entry, error, outcomes)
                continue
            self._paths[entry.record.agent_id] = entry.path
            self._remember_written(str(entry.path), entry.record, write)

    def _premark(self, folder: str, record: SidecarRecord, temp: str) -> None:
        """A new running record's marker, linked to its staged file before the rename makes
        the record visible. Linked after it (as ``_mark`` would), a kill -9 between the two
        left a running record without a marker, which recovery — it reads only the markers —
        never saw again (the crash harness caught it: two children ``running`` for good). A
        marker whose record never appeared (a kill before the rename, a failed write) is
        dropped by ``list_running``."""
        if record.agent_id in self._marked or record.status in TERMINAL_STATUSES:
            return  # (the status, not ``is_terminal``: a Python call less per write)
        markers = f"{folder}/{RUNNING_DIR}"
        try:
            if markers not in self._marker_dirs:
                ensure_private_tree(self.state.home, Path(markers))
                self._marker_dirs.add(markers)
            _link_marker(temp, f"{markers}/{record.agent_id}")
        except OSError as exc:  # ``_mark`` tries again once the record is in place
            logger.warning("running marker of %s: %s", record.agent_id, exc)
            return
        self._marked.add(record.agent_id)

    def _mark(self, folder: str, record: SidecarRecord, terminal: bool) -> None:
        """Keep ``.running/<id>`` in step with the record (``terminal``: its status is), so
        start-up recovery finds the runs that may be orphans without reading every sidecar the
        project ever wrote."""
        agent_id = record.agent_id
        if not terminal and agent_id in self._marked:
            return  # linked before its rename (``_premark``): every running write but a failed link
        markers = f"{folder}/{RUNNING_DIR}"
        try:
            if not terminal:
                if agent_id not in self._marked:
                    if markers not in self._marker_dirs:
                        ensure_private_tree(self.state.home, Path(markers))
                        self._marker_dirs.add(markers)
                    _link_marker(f"{folder}/{agent_id}{SIDECAR_SUFFIX}", f"{markers}/{agent_id}")
                    self._marked.add(agent_id)
            elif agent_id in self._marked:
                self._marked.discard(agent_id)
                self._retire_marker(folder, f"{markers}/{agent_id}", agent_id)
            elif os.path.lexists(marker := f"{markers}/{agent_id}"):
                os.unlink(marker)
        except FileNotFoundError:
            pass
        except OSError as exc:  # the record is written; a marker is only an index
            logger.warning("running marker of %s: %s", agent_id, exc)

    def _retire_marker(self, folder: str, marker: str, agent_id: str) -> None:
        """A finished run's marker is a link to its record's first version, which the terminal
        write has just replaced: instead of freeing that inode, keep the file in ``.spare/`` for
        a later owner write to rewrite (``stage_write(reuse=)``). A new inode costs 20-500 µs
        of kernel CPU on ext4 (depending on where the folder is on the disk), so a fan-out's
        later children write their first record without one. Past ``SPARE_LIMIT`` spares per
        folder the marker is removed. Readers never look in ``.spare/``; a crash leaves its
        files behind as it would leave a temp file (stale, ignored)."""
        pool = self._spares.setdefault(folder, [])
        if len(pool) >= SPARE_LIMIT:
            os.unlink(marker)
            return
        spares = f"{folder}/{SPARE_DIR}"
        spare = f"{spares}/{agent_id}"  # ids are never reused: no two spares share a name
        try:
            if spares not in self._spare_dirs:
                ensure_private_tree(self.state.home, Path(spares))
                self._spare_dirs.add(spares)
            os.rename(marker, spare)
        except FileNotFoundError:
            raise
        except OSError:  # no spare then; the marker must go all the same
            os.unlink(marker)
            return
        pool.append(spare)

    def close(self) -> None:
        """Remove this store's spare files (it stays usable: later writes make new files)."""
        for pool in self._spares.values():
            while pool:
                try:
                    os.unlink(pool.pop())
                except FileNotFoundError:
                    pass

    def stop_requested_ids(self, project_path: str | Path) -> set[str]:
        """Ids of this project's runs with a stop request on file (one directory listing, so
        a session can poll for ``tasks stop`` without reading every running record)."""
        folder = ProjectState(home=self.state.home, project=Path(str(project_path))).agents_dir
        try:
            return set(os.listdir(folder / STOP_DIR))
        except FileNotFoundError:
            return set()

    def list_running(self, project_path: str | Path) -> list[SidecarRecord]:
        """Records of this project that are still ``running`` (orphan candidates).

        Reads only the records named in ``.running/``; a project without that folder (written
        before it existed) is scanned whole. Stale markers (terminal or missing records) are
        dropped on the way."""
        project = str(project_path)
        folder = ProjectState(home=self.state.home, project=Path(project)).agents_dir
        markers = folder / RUNNING_DIR
        if not markers.is_dir():
            return [r for r in self.list_agents(project) if r.status == "running"]
        found: list[SidecarRecord] = []
        for name in sorted(os.listdir(markers)):
            try:
                record = self._load(folder / f"{check_agent_id(name)}{SIDECAR_SUFFIX}")
            except StoreError as exc:
                logger.warning("skipping sidecar: %s", exc)
                continue
            if record is None or record.is_terminal:
                with contextlib.suppress(OSError):
                    os.unlink(markers / name)
                continue
            if record.project_path == project:
                found.append(record)
        return sorted(found, key=lambda r: r.created_at)

    @staticmethod
    def _fail(entry: _Staged, error: BaseException, outcomes: list[BatchOutcome]) -> None:
        logger.warning("sidecar write of agent %s failed: %s", entry.record.agent_id, error)
        for index in entry.ops:
            outcomes[index].value = None
            outcomes[index].error = error

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
        """The project's agents folder, made private (``0700`` down from home) on first use."""
        folder = self._folders.get(project_path)
        if folder is None:
            folder = ProjectState(home=self.state.home, project=Path(project_path)).agents_dir
            ensure_private_tree(self.state.home, folder)
            self._folders[project_path] = folder
        return folder

    def _lease_path(self, agent_id: str) -> Path:
        folder = self._agents_dir(str(self.state.project))
        return folder / f"{check_agent_id(agent_id)}{leases.LEASE_SUFFIX}"

    @contextmanager
    def _locked(self, folders: Sequence[Path]) -> Iterator[None]:
        """This process's writer lock plus an exclusive ``flock`` per folder (sorted order, so
        two processes locking the same folders cannot deadlock)."""
        with self._writing, ExitStack() as stack:
            for folder in folders:
                fd = self._open_lock(folder)
                stack.callback(os.close, fd)  # closing releases the flock
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield

    def _open_lock(self, folder: Path) -> int:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            return os.open(folder / LOCK_NAME, flags, FILE_MODE)
        except FileNotFoundError:
            # The folder went away since it was made (someone cleaned the state folder): make
            # it again, private, rather than trusting the memo.
            ensure_private_tree(self.state.home, folder)
            return os.open(folder / LOCK_NAME, flags, FILE_MODE)

    def _locate(self, agent_id: str) -> Path | None:
        known = self._paths.get(agent_id)
        if known is not None and os.path.lexists(known):
            return known
        name = f"{agent_id}{SIDECAR_SUFFIX}"
        candidates = [self.state.agents_dir / name]
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
            record = self.cache.get(agent_id, _signature(info))
        if record is None:
            found = read_private(path)
            if found is None:
                return None
            record = self._parse(path, found[0])
            with self._mutex:
                self.cache.put(record, _signature(found[1]))
        return self._with_stop_request(path, record)

    @staticmethod
    def _with_stop_request(path: Path, record: SidecarRecord) -> SidecarRecord:
        """A running record shows a stop request made through ``request_stop`` (its file)."""
        if record.stop_requested or record.is_terminal:
            return record
        if os.path.lexists(path.parent / STOP_DIR / record.agent_id):
            return replace(record, stop_requested=True)
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


def _link_marker(sidecar: str, path: str) -> None:
    """The running marker as a hard link to the sidecar just written: a directory entry, no
    new inode (on this project's ext4 a link costs ~13 µs against ~19 for a new file, and its
    removal less too). Where links are not supported, an empty file instead."""
    try:
        os.link(sidecar, path, follow_symlinks=False)
    except FileExistsError:
        pass
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP):
            raise
        _make_marker(path)


def _make_marker(path: str) -> None:
    """An empty ``0600`` file in one system call (``mknod`` never follows a symlink); where
    ``mknod`` may not make regular files (some systems reserve it), an exclusive open."""
    try:
        os.mknod(path, FILE_MODE | stat.S_IFREG)
    except FileExistsError:
        pass
    except (PermissionError, NotImplementedError, AttributeError):
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            os.close(os.open(path, flags, FILE_MODE))
        except FileExistsError:
            pass
